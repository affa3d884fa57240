"""``run_search``: input checks, units of work, budgets, executors, checkpoints, signals,
progress.

The top-level enumeration is cut into *units*: the first kernel-level moves (a pre-defined op,
or a graph-defined kernel with one input subset and one map configuration), in the
enumerator's deterministic order. A unit is explored completely by one worker; an executor
(``search.executors``: in this process, a local process pool, or Ray tasks on a cluster) runs
them and hands results back as they finish; merging keeps, per distinct μGraph, the find of
the lowest unit, so the accepted set and its order (best-first by estimated cost, ties by
structure key) do not depend on the executor, the number of workers or the order units finish
in. After each unit (at most every ``checkpoint_every_s``) the checkpoint is rewritten
atomically: the program and config keys, the finished units, the accepted μGraphs (our JSON
format, with verdict summaries and costs) and the statistics. Resuming skips finished units and
restores their accepted μGraphs; a unit that was running when the search was stopped is run
again from its start, so an interrupted and resumed search yields the same accepted set as an
uninterrupted one.

The budget is a hard wall-clock cap: at ``budget - grace`` no unit is started and running units
stop at their next state (they also hand the deadline to a pruner or checker that has
``set_deadline``); at ``budget`` whatever still runs is killed. SIGINT and SIGTERM stop the
workers, write the checkpoint and raise ``SearchInterrupted``.

Imports ``ir`` and the rest of ``search`` only.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirage_formal.errors import GraphError, MirageError, UnsupportedOpError
from mirage_formal.ir.graph import GET, INPUT, ITER, KERNEL_OP, KernelGraph
from mirage_formal.ir.ops import KERNEL, REGISTRY
from mirage_formal.ir.serialize import atomic_write_text, dumps_ugraphs, ugraphs_from_json
from mirage_formal.search.config import SearchConfig
from mirage_formal.search.cost import Cost, estimate
from mirage_formal.search.executors import Executor, make_executor
from mirage_formal.search.executors.unit import (
    TIME_STOP,
    Components,
    Job,
    UnitResult,
    register,
    unregister,
)
from mirage_formal.search.protocols import Checker, Pruner
from mirage_formal.search.seeds import lifted_candidates
from mirage_formal.search.signals import SearchInterrupted, as_interrupted, interrupt_handlers
from mirage_formal.search.space import Move, Stats, Stop
from mirage_formal.search.state import Accepted, SearchState, merge_accepted

CHECKPOINT_FORMAT = "mirage-formal.search-checkpoint"


@dataclass
class SearchResult:
    """Accepted μGraphs best-first, with statistics and timings."""

    accepted: list[Accepted]
    stats: Stats
    elapsed_s: float
    time_to_first_s: float | None
    time_to_best_s: float | None
    units_total: int
    units_done: int
    stopped: str | None
    config: SearchConfig
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.units_done == self.units_total and self.stopped is None

    @property
    def best(self) -> Accepted | None:
        return self.accepted[0] if self.accepted else None

    @property
    def coverage(self) -> float:
        """The fraction of the space's units finished (1.0: the whole space was searched)."""
        return self.units_done / self.units_total if self.units_total else 1.0

    def summary(self) -> dict[str, Any]:
        eta = self.extra.get("eta_s")
        return {
            **self.stats.as_dict(),
            "accepted_events": self.stats.accepted,
            "accepted": len(self.accepted), "elapsed_s": round(self.elapsed_s, 3),
            "time_to_first_s": None if self.time_to_first_s is None else round(self.time_to_first_s, 3),
            "time_to_best_s": None if self.time_to_best_s is None else round(self.time_to_best_s, 3),
            "units": f"{self.units_done}/{self.units_total}", "stopped": self.stopped,
            "coverage": round(self.coverage, 4),
            "eta_to_finish_s": None if eta is None else round(float(eta), 1),
            "best_cost_us": None if not self.accepted else round(self.accepted[0].cost.seconds * 1e6, 3),
        }

    def save(self, out_dir: str | Path) -> Path:
        """Write ``ugraphs.json`` (best-first, our format) and ``report.md`` into ``out_dir``."""
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        p = d / "ugraphs.json"
        atomic_write_text(p, dumps_ugraphs([a.graph for a in self.accepted],
                                           [a.meta() for a in self.accepted]) + "\n")
        atomic_write_text(d / "report.md", self.report())
        return p

    def report(self) -> str:
        s = self.summary()
        lines = [f"# search report ({self.config.name})", ""]
        lines += [f"- {k}: {v}" for k, v in s.items() if k != "by_level"]
        lines += ["", "| rank | est. µs | launches | DRAM MB | found at s |", "|---|---|---|---|---|"]
        for i, a in enumerate(self.accepted[:20]):
            lines.append(f"| {i} | {a.cost.seconds * 1e6:.2f} | {a.cost.launches} | "
                         f"{a.cost.dram_bytes / 1e6:.2f} | {a.found_at_s:.2f} |")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- input checks

def check_program(program: Any, config: SearchConfig) -> None:
    """Reject bad input before the search starts (clear errors, no partial work)."""
    if not isinstance(program, KernelGraph):
        raise MirageError(f"the program must be a KernelGraph (from Graph.build()), got {type(program).__name__}")
    if not program.outputs:
        raise GraphError("the program has no outputs; mark its results with g.output(...)")
    for n in program.nodes:
        if n.op in (INPUT,):
            continue
        if n.op in (KERNEL_OP, GET, ITER):
            raise MirageError("the program already contains graph-defined kernels; pass the plain "
                              "tensor program (pre-defined ops only) to the search")
        d = REGISTRY.get(n.op)
        if d is None or KERNEL not in d.levels:
            raise UnsupportedOpError(f"the program uses op {n.op!r}, which the search does not support")
    for o in program.outputs:
        if o.op == INPUT:
            raise MirageError(f"output {o.attr('name')!r} is the input itself: a μGraph's outputs "
                              "are tensors it computes; leave it out of g.output(...) and use the "
                              "input directly where you need it")
    config.validate()
    missing = inexpressible(program, config)
    if missing:
        raise UnsupportedOpError(
            f"the program uses {', '.join(missing)}, which search space {config.name!r} cannot express; "
            "add them to its kernel_ops or block_ops (or name no preset: the space derived from the "
            "program expresses all of its ops)")


def inexpressible(program: KernelGraph, config: SearchConfig) -> list[str]:
    """The program's ops that ``config`` can express neither as a pre-defined kernel op, nor as
    a block op, nor (row reductions and normalisations) through an accumulator; each with why."""
    gk = config.max_graph_kernels > 0
    block = set(config.block_ops) if gk else set()
    accums = set(config.accums) if gk else set()
    out: list[str] = []
    for n in program.nodes:
        op = n.op
        if op == INPUT or op in config.kernel_ops or op in block:
            continue
        if op in ("sum", "mean") and accums & {f"{op}:1", f"{op}:x"}:
            continue
        if op == "rms_norm" and "rms:1" in accums and "div" in block and (len(n.src) == 1 or "mul" in block):
            continue
        if op == "rms_norm":
            what = ("rms_norm with a gain (or rms:1 in accums and div, mul in block_ops)" if len(n.src) == 2
                    else "rms_norm (or rms:1 in accums and div in block_ops)")
        else:
            what = f"{op} (or {op}:1 in accums)" if op in ("sum", "mean") else op
        if what not in out:
            out.append(what)
    return out


# ---------------------------------------------------------------- budgets and units

def check_budget(budget_s: Any) -> float | None:
    """A wall-clock budget in seconds: None (no limit) or a finite positive number."""
    if budget_s is None:
        return None
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)):
        raise MirageError(f"budget_s={budget_s!r} must be a number of seconds (or None for no limit)")
    b = float(budget_s)
    if not math.isfinite(b) or b <= 0:
        raise MirageError(f"budget={budget_s!r} seconds: a budget must be a finite positive number "
                          "of seconds (leave it out for no limit)")
    return b


def budget_grace(budget_s: float) -> float:
    """Seconds before the hard deadline at which workers are told to stop: enough for a unit to
    notice (it checks between states) and report, small against the budget."""
    return min(2.0, 0.05 * budget_s)


@dataclass(frozen=True)
class Given:
    """``Job.components`` for objects already built here (fork pools inherit them; Ray must be
    able to pickle them, which Z3-backed pruners cannot: pass a recipe instead)."""

    pruner: Pruner
    checker: Checker

    def __call__(self) -> tuple[Pruner, Checker]:
        return self.pruner, self.checker


def _program_key(program: KernelGraph, config: SearchConfig, moves: Sequence[Move]) -> str:
    """What a checkpoint must match: the program, the space and the list of work units (its
    done set holds unit indices, so a different split of the same space must not resume)."""
    units = hashlib.sha256("\n".join(m.describe() for m in moves).encode()).hexdigest()[:16]
    return f"{program.key}:{json.dumps(config.to_dict(), sort_keys=True)}:units {units}"


def _write_checkpoint(path: Path, key: str, done: set[int], accepted: dict[str, Accepted],
                      stats: Stats, elapsed: float) -> None:
    acc = sorted(accepted.values(), key=lambda a: (a.cost.seconds, a.graph.key))
    doc = {"format": CHECKPOINT_FORMAT, "version": 1, "key": key, "done": sorted(done),
           "elapsed_s": elapsed, "stats": stats.as_dict(),
           "accepted": json.loads(dumps_ugraphs([a.graph for a in acc], [a.meta() for a in acc]))}
    atomic_write_text(path, json.dumps(doc) + "\n")


def _read_checkpoint(path: Path, key: str) -> tuple[set[int], dict[str, Accepted], Stats, float]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise MirageError(f"checkpoint {path}: cannot read: {e}; delete it to start afresh") from None
    if doc.get("format") != CHECKPOINT_FORMAT or doc.get("key") != key:
        raise MirageError(f"checkpoint {path} belongs to another program or search space; delete it "
                          "or pass another path")
    acc: dict[str, Accepted] = {}
    for g, meta in ugraphs_from_json(doc["accepted"], str(path)):
        c = meta["cost"]
        merge_accepted(acc, [Accepted(g, meta["verdict"], Cost(c["us"] / 1e6, int(c["launches"]),
                                                               c["dram_bytes"], c["l2_bytes"], c["flops"]),
                                      float(meta["found_at_s"]), int(meta["unit"]))])
    stats = Stats()
    for k, v in doc.get("stats", {}).items():
        if hasattr(stats, k):
            setattr(stats, k, v)
    return set(doc["done"]), acc, stats, float(doc.get("elapsed_s", 0.0))


def _check_seeds(program: KernelGraph, config: SearchConfig, pruner: Pruner, checker: Checker,
                 accepted: dict[str, Accepted], stats: Stats, soft: float | None,
                 max_candidates: int | None, t0: float) -> str | None:
    """Check the lifted candidates (unit -1) like any candidate; returns a stop reason if the
    budget ran out while checking them."""
    graphs = lifted_candidates(program, config.grid_sizes, config.max_grid_axes, config.threads)
    if not graphs:
        return None
    st = SearchState(program, config, pruner, checker, start=t0, deadline=soft,
                     max_candidates=max_candidates, unit=-1)
    why = None
    # (here, not in a worker the hard deadline kills: the checker stops its trials at it)
    set_deadline = getattr(checker, "set_deadline", None)
    if callable(set_deadline):
        set_deadline(soft)
    try:
        for g in graphs:
            st.on_candidate(g)
    except Stop as e:
        why = str(e)
    finally:
        if callable(set_deadline):
            set_deadline(None)
    stats.add(st.stats)
    merge_accepted(accepted, st.best())
    return why if why == TIME_STOP else None


def run_search(program: KernelGraph, config: SearchConfig, pruner: Pruner, checker: Checker,
               checkpoint: Path | str | None = None, workers: int | None = 1, progress: bool = True,
               budget_s: float | None = None, max_candidates: int | None = None, *,
               executor: str | Executor | None = None,
               components: Components | None = None, seeds: bool = True) -> SearchResult:
    """Search the space of ``config`` for μGraphs equivalent to ``program``.

    ``pruner.keep`` is asked about every new tensor, ``checker.check`` about complete
    candidates. ``budget_s`` is a hard wall-clock cap: workers are told to stop shortly before
    it and whatever still runs at it is killed, so this returns within the budget plus the time
    to write the checkpoint; ``max_candidates`` bounds the checker calls per unit. The
    best-so-far is returned when either is spent. ``checkpoint`` names a file that is written
    atomically as units finish and resumed from if it exists.

    ``executor`` picks where units run (:func:`~mirage_formal.search.executors.make_executor`:
    ``"local"``/None, ``"ray"``, ``"ray:local"``, a Ray address, or an :class:`Executor`);
    ``workers`` is its number of parallel units (None: all cores / all cluster CPUs).
    ``components`` is a picklable recipe that builds ``(pruner, checker)`` in a worker; remote
    executors need it when the pruner or checker cannot be pickled (the Z3 oracle cannot).

    ``seeds``: before the units, check the program's lifts (``search.seeds``: the whole
    program as one graph-defined kernel, split over the dimensions no op reduces) here, with
    this process's pruner-free checker path; they are found at once where the enumeration
    would reach them last, and count as unit -1.

    SIGINT and SIGTERM stop the workers, write the checkpoint and raise
    :class:`~mirage_formal.search.signals.SearchInterrupted` (with the units saved).
    """
    check_program(program, config)
    budget = check_budget(budget_s)
    ex = executor if executor is not None and not isinstance(executor, str) else make_executor(executor, workers)
    t0 = time.monotonic()
    t0_wall = time.time()
    hard = None if budget is None else t0 + budget
    soft = None if budget is None else t0 + budget - budget_grace(budget)

    probe = SearchState(program, config, pruner, checker)
    moves = probe.enumerator().moves()
    key = _program_key(program, config, moves)
    ck = Path(checkpoint) if checkpoint is not None else None
    done: set[int] = set()
    accepted: dict[str, Accepted] = {}
    stats = Stats()
    prior = 0.0
    if ck is not None and ck.exists():
        done, accepted, stats, prior = _read_checkpoint(ck, key)
    todo = [i for i in range(len(moves)) if i not in done]
    job = Job(uuid.uuid4().hex, program, config, components or Given(pruner, checker), len(moves),
              t0_wall, None if soft is None else t0_wall + (soft - t0), max_candidates)
    register(job, pruner, checker, moves)
    stopped: str | None = None
    unit_seconds: dict[int, float] = {}
    workers_seen: set[str] = set()
    last_ck = time.monotonic()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(moves), initial=len(done), desc=f"search {config.name}", unit="unit",
                   dynamic_ncols=True)

    def absorb(r: UnitResult) -> bool:
        nonlocal stopped, last_ck
        stats.add(r.stats)
        merge_accepted(accepted, r.accepted)
        if r.stopped is None:
            done.add(r.index)
            unit_seconds[r.index] = r.seconds
            workers_seen.add(r.worker)
        elif stopped is None:
            stopped = r.stopped
        if bar is not None:
            bar.update(1 if r.stopped is None else 0)
            bar.set_postfix(visited=stats.visited, pruned=stats.pruned_oracle + stats.pruned_shape
                            + stats.pruned_bound + stats.pruned_dedup, accepted=len(accepted))
        if ck is not None and time.monotonic() - last_ck >= config.checkpoint_every_s:
            _write_checkpoint(ck, key, done, accepted, stats, prior + time.monotonic() - t0)
            last_ck = time.monotonic()
        # a time stop reaches every unit at once: keep collecting the others' partial results;
        # any other stop (the candidate budget) ends the search now
        return r.stopped is None or r.stopped == TIME_STOP

    try:
        with interrupt_handlers():
            try:
                if seeds:  # in here: an interrupt while checking them still saves the checkpoint
                    stopped = _check_seeds(program, config, pruner, checker, accepted, stats,
                                           soft, max_candidates, t0)
                why = ex.run(job, todo, absorb, soft, hard) if todo else None
            except KeyboardInterrupt as e:
                raise as_interrupted(e) from None
        if why is not None and stopped is None:
            stopped = why
        elif stopped is None and soft is not None and len(done) < len(moves):
            stopped = TIME_STOP
    except SearchInterrupted as e:
        e.units_done, e.units_total = len(done), len(moves)
        e.checkpoint = None if ck is None else str(ck)
        raise
    finally:
        if bar is not None:
            bar.close()
        unregister(job.id)
        if ck is not None:
            _write_checkpoint(ck, key, done, accepted, stats, prior + time.monotonic() - t0)
    elapsed = time.monotonic() - t0
    best = sorted(accepted.values(), key=lambda a: (a.cost.seconds, a.graph.key))
    first = min((a.found_at_s for a in best), default=None)
    ran = len(moves) - len(todo)
    new_done = len(done) - ran
    left = len(moves) - len(done)
    eta = 0.0 if left == 0 else (elapsed / new_done * left if new_done else None)
    return SearchResult(best, stats, elapsed, first, best[0].found_at_s if best else None,
                        len(moves), len(done), stopped, config,
                        {"resumed_units": ran, "workers": ex.workers, "executor": ex.name,
                         "pid": os.getpid(), "eta_s": eta, "unit_seconds": unit_seconds,
                         "worker_ids": sorted(workers_seen),
                         "executor_info": dict(getattr(ex, "info", None) or {})})


def rank(graphs: list[KernelGraph], target: str = "h100") -> list[tuple[KernelGraph, Cost]]:
    """Order μGraphs by the analytic cost, best first."""
    return sorted(((g, estimate(g, target)) for g in graphs), key=lambda r: (r[1].seconds, r[0].key))
