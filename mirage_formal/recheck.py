"""The float64 re-check of the search's accepted μGraphs (``_recheck_all``: best first, in
threads, within the budget) and, with a GPU, the split that lets the GPU stage start early:
the μGraphs it may pick are re-checked first (``_gpu_stage_pool``), the rest on threads of
their own beside it (``_TailRecheck``).

Imports ``ir``, ``search``, ``verify``, ``optimized`` and ``gpu_stage`` (its pool size).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING

from mirage_formal import gpu_stage
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.optimized import RECHECK_RTOL, Optimized
from mirage_formal.search import Accepted
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
    pool = gpu_stage.GPU_GRID_FILLING_POOL if pool is None else pool
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


def _recheck_all(found: Iterable[Accepted], verifier: Verifier | _LazyVerifier, recheck: FloatRecheck | None,
                 time_left: Callable[[float], bool], threads: int,
                 ) -> tuple[list[Optimized], list[Optimized], list[Accepted]]:
    """The float64 re-check of accepted μGraphs, best first: (passed, flagged, not
    re-checked). Up to ``threads`` re-checks run at once (numpy's large operations release the
    GIL; the search's workers are idle by now), started in order while ``time_left(s)`` says
    ``s`` more seconds fit the budget (s: the longest re-check so far), so a budget stop
    leaves the best ones re-checked and the last ones started end about at the deadline; the
    lists keep the search's order."""
    accepted: list[Optimized] = []
    flagged: list[Optimized] = []
    unchecked: list[Accepted] = []
    started: list[tuple[Accepted, Verdict, Future[tuple[float, float]]]] = []

    def timed(rc: FloatRecheck, g: KernelGraph, output_map: Sequence[int] | None,
              ) -> tuple[float, float]:
        t0 = time.monotonic()
        return rc.error(g, output_map), time.monotonic() - t0

    with ThreadPoolExecutor(max_workers=threads) as pool:
        for a in found:
            longest = max((f.result()[1] for _, _, f in started if f.done()), default=0.0)
            if recheck is None or not time_left(longest):
                unchecked.append(a)
                continue
            # (the verifier stays on this thread)
            v = a.verdict if isinstance(a.verdict, Verdict) else verifier.check(a.graph)
            started.append((a, v, pool.submit(timed, recheck, a.graph, v.output_map)))
            while sum(not f.done() for _, _, f in started) >= threads:
                wait([f for _, _, f in started if not f.done()], return_when=FIRST_COMPLETED)
    for a, v, f in started:
        o = Optimized(a.graph, v, a.cost, a.found_at_s, f.result()[0])
        (accepted if v.accepted and o.float64_error <= RECHECK_RTOL else flagged).append(o)
    return accepted, flagged, unchecked
