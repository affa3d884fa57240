"""The float64 re-check of the search's accepted μGraphs (``_recheck_all``: best first, in
forked processes or threads, within the budget) and, with a GPU, the split that lets the GPU
stage start early: the μGraphs it may pick are re-checked first (``_gpu_stage_pool``), the
rest on threads of their own beside it (``_TailRecheck``).

Before the GPU stage, on Linux, the re-checks run in processes forked from this one (they
inherit the program's float64 outputs and the μGraphs, and send back one number each):
numpy's evaluation of a block graph holds the GIL for much of its time, and on the device's 16
cores mqa b=8's 32 re-checks took 24.9 s on 8 threads, no faster than on one. Beside the GPU
stage they stay on threads (no fork while the CUDA context and the stage's threads live).

Imports ``ir``, ``search``, ``verify``, ``optimized`` and ``gpu_sizes`` (its pool size).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING

from threadpoolctl import threadpool_limits

from mirage_formal import gpu_sizes
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.optimized import RECHECK_RTOL, Optimized
from mirage_formal.search import Accepted
from mirage_formal.search.signals import worker_initializer
from mirage_formal.verify import Verdict, Verifier
from mirage_formal.verify.float64 import FloatRecheck

if TYPE_CHECKING:
    from mirage_formal.optimize import OptimizeResult

#: the most float64 re-checks run at once (threads; at most the search's worker count)
RECHECK_THREADS = 8


def _gpu_stage_pool(found: Sequence[Accepted], gpu_top: int,
                    pool: int | None = None) -> tuple[list[Accepted], list[Accepted]]:
    """(head, tail) of the search's accepted μGraphs (best-first by cost): the head holds every
    one the GPU stage may pick (``gpu_candidates``: the first of each kernel count, then the
    cheapest; ``grid_filling_variants``: the first ``pool``), each list in the search's order."""
    pool = gpu_sizes.GPU_GRID_FILLING_POOL if pool is None else pool
    firsts: dict[int, Accepted] = {}
    for a in found:
        firsts.setdefault(len(a.graph.kernels), a)
    keep = {id(a) for a in found[:max(pool, gpu_top)]} | {id(a) for a in firsts.values()}
    return [a for a in found if id(a) in keep], [a for a in found if id(a) not in keep]


class _TailRecheck:
    """The float64 re-check of the accepted μGraphs the GPU stage does not pick from
    (``_gpu_stage_pool``'s tail), on threads of its own while the stage runs; ``join_into``
    waits for it and adds what it found to the result (passed ones among the unmeasured,
    which stay after the measured ones, best-first by cost). A μGraph restored from a
    checkpoint (no verdict object) is verified by a verifier of its own, built on first need:
    the stage's stays on the calling thread."""

    def __init__(self, tail: Sequence[Accepted], program: KernelGraph, bound: float, seed: int,
                 recheck: FloatRecheck | None, fits: Callable[[float], bool], threads: int) -> None:
        self._thread: ThreadPoolExecutor | None = None
        self._future: Future[tuple[list[Optimized], list[Optimized], list[Accepted]]] | None = None
        self.seconds = 0.0
        if not tail:
            return
        verifier = _LazyVerifier(program, bound, seed)

        def run() -> tuple[list[Optimized], list[Optimized], list[Accepted]]:
            t0 = time.monotonic()
            try:
                return _recheck_all(tail, verifier, recheck, fits, threads)
            finally:
                self.seconds = time.monotonic() - t0

        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tail-recheck")
        self._future = self._thread.submit(run)

    def join_into(self, out: OptimizeResult) -> None:
        if self._future is None or self._thread is None:
            return
        passed, flagged, unchecked = self._future.result()
        self._thread.shutdown()
        have = {a.graph.key for a in out.accepted}
        rest = [a for a in out.accepted if a.measured_us is None]
        rest += [a for a in passed if a.graph.key not in have]
        rest.sort(key=lambda a: (a.cost.seconds, a.graph.key))
        out.accepted[:] = [a for a in out.accepted if a.measured_us is not None] + rest
        out.flagged.extend(flagged)
        out.not_rechecked.extend(unchecked)
        out.seconds["float64_recheck_beside_gpu"] = self.seconds


class _LazyVerifier:
    """A verifier of ``program`` (as the search's: same bound and seed) built at the first
    ``check``."""

    def __init__(self, program: KernelGraph, bound: float, seed: int) -> None:
        self.args = (program, bound, seed)
        self.verifier: Verifier | None = None

    def check(self, graph: KernelGraph) -> Verdict:
        if self.verifier is None:
            program, bound, seed = self.args
            self.verifier = Verifier(program, bound=bound, seed=seed, float_check=False)
        return self.verifier.check(graph)


#: what forked re-check processes inherit: the re-check (the program's float64 outputs) and
#: each μGraph with its output map, by index (set just before the pool forks)
_FORKED: tuple[FloatRecheck, list[tuple[KernelGraph, Sequence[int] | None]]] | None = None


def _forks() -> bool:
    """Whether re-checks may run in forked processes here (Linux; elsewhere fork is not the
    safe default and the re-checks use threads)."""
    return sys.platform.startswith("linux") and "fork" in mp.get_all_start_methods()


def _forked_init(parent_pid: int, blas_threads: int) -> None:
    worker_initializer(parent_pid)
    threadpool_limits(limits=blas_threads)  # the cores shared out between the processes


def _forked_error(i: int) -> tuple[float, float]:
    """In a forked process: the float64 error of the ``i``-th μGraph and its seconds."""
    assert _FORKED is not None, "the re-check pool was not forked from _recheck_all"
    rc, jobs = _FORKED
    g, output_map = jobs[i]
    t0 = time.monotonic()
    return rc.error(g, output_map), time.monotonic() - t0


def _recheck_all(found: Iterable[Accepted], verifier: Verifier | _LazyVerifier, recheck: FloatRecheck | None,
                 time_left: Callable[[float], bool], threads: int, processes: bool = False,
                 ) -> tuple[list[Optimized], list[Optimized], list[Accepted]]:
    """The float64 re-check of accepted μGraphs, best first: (passed, flagged, not
    re-checked). Up to ``threads`` re-checks run at once, in forked processes with
    ``processes`` where :func:`_forks` allows it, else in threads (the search's workers are
    idle by now); started in order while ``time_left(s)`` says ``s`` more seconds fit the
    budget (s: the longest re-check so far), so a budget stop leaves the best ones re-checked
    and the last ones started end about at the deadline; the lists keep the search's order.
    A process that dies (or a fork that fails) sends the same re-checks to threads."""
    accepted: list[Optimized] = []
    flagged: list[Optimized] = []
    unchecked: list[Accepted] = []
    # the μGraphs themselves (``found`` may be a progress bar over them, advanced as the
    # loop below takes each one)
    items: list[Accepted] = list(getattr(found, "iterable", found))
    # forked processes when every verdict is at hand (the search's own; a μGraph restored
    # from a checkpoint is verified here first, on this thread, so it takes the threads)
    fork = (processes and threads > 1 and recheck is not None and len(items) > 1 and _forks()
            and all(isinstance(a.verdict, Verdict) for a in items))

    def timed(rc: FloatRecheck, g: KernelGraph, output_map: Sequence[int] | None,
              ) -> tuple[float, float]:
        t0 = time.monotonic()
        return rc.error(g, output_map), time.monotonic() - t0

    def run(fork: bool) -> list[tuple[Accepted, Verdict, float]]:
        global _FORKED
        started: list[tuple[Accepted, Verdict, Future[tuple[float, float]]]] = []
        unchecked.clear()
        pool: Executor
        if fork and recheck is not None:
            _FORKED = (recheck, [(a.graph, a.verdict.output_map) for a in items])
            blas = max(1, (os.cpu_count() or 1) // threads)
            pool = ProcessPoolExecutor(max_workers=threads, mp_context=mp.get_context("fork"),
                                       initializer=_forked_init, initargs=(os.getpid(), blas))
        else:
            pool = ThreadPoolExecutor(max_workers=threads)
        try:
            with pool:
                for i, a in enumerate(items if retried else found):
                    longest = max((f.result()[1] for _, _, f in started if f.done()), default=0.0)
                    if recheck is None or not time_left(longest):
                        unchecked.append(a)
                        continue
                    # (the verifier stays on this thread)
                    v = a.verdict if isinstance(a.verdict, Verdict) else verifier.check(a.graph)
                    started.append((a, v, pool.submit(_forked_error, i) if fork else
                                    pool.submit(timed, recheck, a.graph, v.output_map)))
                    while sum(not f.done() for _, _, f in started) >= threads:
                        wait([f for _, _, f in started if not f.done()], return_when=FIRST_COMPLETED)
            return [(a, v, f.result()[0]) for a, v, f in started]
        finally:
            _FORKED = None

    retried = False
    try:
        done = run(fork)
    except (BrokenProcessPool, OSError):
        # a re-check process died (the OOM killer, a signal) or could not be forked (a
        # process limit): the same re-checks on threads
        retried = True
        done = run(False)
    for a, v, err in done:
        o = Optimized(a.graph, v, a.cost, a.found_at_s, err)
        (accepted if v.accepted and o.float64_error <= RECHECK_RTOL else flagged).append(o)
    return accepted, flagged, unchecked
