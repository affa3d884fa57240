"""Executors: where the search's work units run.

The driver (``search.driver``) cuts the search into units (top-level moves) and hands the
indices still to do to an :class:`Executor`, which runs each unit through
:func:`~mirage_formal.search.executors.unit.run_unit` somewhere and gives every
:class:`~mirage_formal.search.executors.unit.UnitResult` back to the driver's callback, in the
order units finish. The driver merges results order-independently, so every executor accepts
the same μGraphs.

* ``local.InlineExecutor``: in this process (one worker).
* ``local.PoolExecutor``: a fork-based process pool on this machine.
* ``ray.RayExecutor``: Ray tasks on a Ray cluster (the optional ``ray`` extra; imported only
  when asked for, so the core package never imports ray).

Both multi-process executors stop dispatching at the soft deadline (workers also stop
themselves there) and kill whatever still runs at the hard deadline.

Imports ``ir`` and the rest of ``search`` only (``ray`` lazily, in ``executors.ray``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from mirage_formal.errors import MirageError
from mirage_formal.search.executors.unit import Job, UnitResult

OnResult = Callable[[UnitResult], bool]
"""The driver's callback: absorbs one result; returns False to stop dispatching new units."""


class Executor(Protocol):
    """Runs units of a :class:`Job` and reports each result through ``on_result``."""

    name: str
    workers: int

    def run(
        self,
        job: Job,
        todo: Sequence[int],
        on_result: OnResult,
        soft_deadline: float | None,
        hard_deadline: float | None,
    ) -> str | None:
        """Run the units ``todo``; return None, or why it stopped early (a hard-deadline kill).

        ``soft_deadline`` and ``hard_deadline`` are ``time.monotonic()`` instants: no unit is
        started after the first (units stop themselves there too); nothing may still run after
        the second: units in flight then are killed and not reported (they stay to do).
        """
        ...


def make_executor(spec: str | None, workers: int | None) -> Executor:
    """The executor for ``spec``: None or ``"local"`` (the process pool, or inline for one
    worker), ``"ray"`` (a Ray cluster started here, or the one ``RAY_ADDRESS`` names),
    ``"ray:local"`` (always start one here), or a Ray address (``"HOST:PORT"``,
    ``"ray://HOST:PORT"``, ``"auto"``). ``workers`` None means: every core here, or every
    CPU of the Ray cluster."""
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        raise MirageError(
            f"workers={workers!r}: the number of search workers must be an integer "
            ">= 1 (1 runs the search in this process)"
        )
    if spec is None or spec == "local":
        from mirage_formal.search.executors.local import (
            InlineExecutor,
            PoolExecutor,
            default_workers,
        )

        n = default_workers() if workers is None else workers
        return InlineExecutor() if n == 1 else PoolExecutor(n)
    if not isinstance(spec, str) or not spec.strip():
        raise MirageError(
            f"executor={spec!r}: use 'local', 'ray', 'ray:local' or a Ray address "
            "such as 'HOST:6379'"
        )
    from mirage_formal.search.executors.ray import RayExecutor

    address = (
        spec.removeprefix("ray:")
        if spec.startswith("ray:") and not spec.startswith("ray://")
        else spec
    )
    return RayExecutor(None if address == "ray" else address, workers)


__all__ = ["Executor", "Job", "OnResult", "UnitResult", "make_executor"]
