"""One work unit, run where a worker is: the job description shipped to workers and the
result shipped back.

A :class:`Job` holds only plain data (the program, the search config, budgets as wall-clock
instants) and ``components``, a picklable zero-argument callable that builds the pruner and the
checker *in the worker*. Z3 contexts, e-graphs and caches are therefore created where they are
used and never cross a process boundary; a worker process builds them once per job (the first
unit it runs) and keeps them for the job's later units (:data:`_BUILT`). A fork-based pool
instead registers the driver's own, already built objects under the job's id before forking
(:func:`register`), so nothing is built twice.

Time: budgets travel as ``time.time()`` instants (comparable across the processes and, with
synchronized clocks, across the machines of a cluster) and are turned into this process's
``time.monotonic()`` on arrival.

Imports ``ir`` and the rest of ``search`` only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mirage_formal.ir.graph import KernelGraph
from mirage_formal.search.config import SearchConfig
from mirage_formal.search.protocols import Checker, Pruner
from mirage_formal.search.space import Move, Stats, Stop
from mirage_formal.search.state import Accepted, SearchState

Components = Callable[[], "tuple[Pruner, Checker]"]

TIME_STOP = "time budget spent"


@dataclass(frozen=True)
class Job:
    """Everything a worker needs to run any unit of one search (picklable)."""

    id: str
    program: KernelGraph
    config: SearchConfig
    components: Components
    units_total: int
    start_wall: float
    deadline_wall: float | None = None
    max_candidates: int | None = None


@dataclass
class UnitResult:
    """What one unit sends back: its statistics, accepted μGraphs and whether it was cut short
    (``stopped``: why; such a unit is not done and is run again on resume)."""

    index: int
    stats: Stats
    accepted: list[Accepted]
    stopped: str | None
    seconds: float
    worker: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Built:
    job: Job
    pruner: Pruner
    checker: Checker
    moves: list[Move]


#: jobs whose components this process has built (or inherited through fork), by job id
_BUILT: dict[str, _Built] = {}


def _moves(job: Job, pruner: Pruner, checker: Checker) -> list[Move]:
    probe = SearchState(job.program, job.config, pruner, checker)
    moves = probe.enumerator().moves()
    if len(moves) != job.units_total:
        raise RuntimeError(
            f"this worker enumerates {len(moves)} units, the driver {job.units_total}: "
            "the driver and the workers run different versions of mirage-formal"
        )
    return moves


def register(job: Job, pruner: Pruner, checker: Checker, moves: list[Move]) -> None:
    """Make already built components available to :func:`run_unit` in this process (and in
    processes forked from it afterwards)."""
    _BUILT[job.id] = _Built(job, pruner, checker, moves)


def unregister(job_id: str) -> None:
    _BUILT.pop(job_id, None)


def _built(job: Job) -> _Built:
    b = _BUILT.get(job.id)
    if b is None:
        # a new job in this (Ray) worker: forget the previous ones, their oracles hold memory
        _BUILT.clear()
        pruner, checker = job.components()
        b = _BUILT[job.id] = _Built(job, pruner, checker, _moves(job, pruner, checker))
    return b


def _tier_counts(pruner: Any) -> dict[str, int]:
    """A pruner's optional ``tier_counts()`` (counters per tier), else nothing."""
    f = getattr(pruner, "tier_counts", None)
    return {k: int(v) for k, v in f().items()} if callable(f) else {}


def _set_deadline(obj: Any, deadline: float | None) -> None:
    """Hand the deadline to a pruner or checker that accepts one (``set_deadline``)."""
    f = getattr(obj, "set_deadline", None)
    if callable(f):
        f(deadline)


def run_unit(job: Job, index: int, worker: str = "") -> UnitResult:
    """Explore unit ``index`` of ``job`` completely (or until a budget is spent)."""
    t_start = time.monotonic()
    now_wall = time.time()
    start = t_start - (now_wall - job.start_wall)
    deadline = None if job.deadline_wall is None else t_start + (job.deadline_wall - now_wall)
    if deadline is not None and t_start >= deadline:
        return UnitResult(index, Stats(), [], TIME_STOP, 0.0, worker)
    b = _built(job)
    st = SearchState(
        job.program,
        job.config,
        b.pruner,
        b.checker,
        start=start,
        deadline=deadline,
        max_candidates=job.max_candidates,
    )
    st.unit = index
    _set_deadline(b.pruner, deadline)
    _set_deadline(b.checker, deadline)
    stopped = None
    before = _tier_counts(b.pruner)
    try:
        st.enumerator().run_move(b.moves[index])
    except Stop as e:
        stopped = str(e)
    finally:
        _set_deadline(b.pruner, None)
        _set_deadline(b.checker, None)
    after = _tier_counts(b.pruner)
    st.stats.pruner_tiers = {k: v - before.get(k, 0) for k, v in after.items()}
    return UnitResult(index, st.stats, st.best(), stopped, time.monotonic() - t_start, worker)
