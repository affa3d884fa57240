"""superoptimize's GPU stage: which accepted μGraphs are autotuned and timed on the device,
which size variants of the fastest are measured too (the rules that pick them live in
``gpu_sizes``: the cost model's cheapest, the fullest wave, the grid-filling, warpgroup-MMA and
TF32 sizes, longer loop ranges of fp32 loops, and a walk over neighbouring sizes while it finds
faster ones), in what order within the budget, and the re-ranking by measured time
(``_gpu_rank``). Every μGraph it measures is verified and re-checked in float64 first (size
variants on a thread of their own, ahead of their tuning: ``_VerifyAhead``); the tuner
(``codegen.autotune``) validates every kernel against the program before timing it.

Imports ``ir``, ``search``, ``verify``, ``optimized``, ``gpu_sizes`` and, lazily,
``codegen.autotune`` and ``codegen.validate``.
"""

from __future__ import annotations

import collections
import contextlib
import math
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from mirage_formal.gpu_sizes import (
    grid_filling_variants,
    kernel_grids,
    loop_range_variants,
    tf32_split_variants,
    tf32_variants,
    variants_to_measure,
    walk_step,
    wgmma_variants,
)
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.serialize import ugraph_to_json
from mirage_formal.optimized import RECHECK_RTOL, Optimized
from mirage_formal.search import Cost, SearchConfig
from mirage_formal.search.derive import H100_SMS
from mirage_formal.verify import Verdict, Verifier
from mirage_formal.verify.float64 import FloatRecheck


def gpu_candidates(accepted: list[Optimized], top: int,
                   program: KernelGraph | None = None) -> list[Optimized]:
    """The ``top`` candidates the GPU stage measures: the cost model's best of each kernel
    count first (the model is least sure across structures: a fused kernel against the
    lowered program), then the rest by estimated cost; and the input ``program``'s own
    lowering when it is among ``accepted``, so the result is never slower than it."""
    firsts: dict[int, Optimized] = {}
    for a in accepted:  # best-first by the cost model
        firsts.setdefault(len(a.graph.kernels), a)
    picked = list(firsts.values())[:top]
    for a in accepted:
        if len(picked) >= top:
            break
        if all(a is not p for p in picked):
            picked.append(a)
    if program is not None:
        own = next((a for a in accepted if a.graph.key == program.key), None)
        if own is not None and all(own is not p for p in picked):
            picked.append(own)  # the input's own lowering, measured as the floor to beat
    return picked


#: the GPU stage also measures size variants (other grid sizes and loop ranges of the space:
#: other tiles, as many blocks as they make) of this many of the fastest measured structures,
#: ``gpu_sizes.GPU_VARIANTS`` each
GPU_VARIANT_STRUCTURES = 2
#: with time left after those, the fastest this many structures in all get theirs too
GPU_MORE_STRUCTURES = 4
#: how many of the fastest structures get the tuner's second round (time allowing), and how
#: far behind the fastest one (its first-round time) the others may be. The first round ranks
#: structures only roughly where the second round's choices (a TMA ring, dense rows) matter:
#: softcap attention's one-kernel loop seed measured 30.27 µs after its first round, 4% behind
#: the first-round winner's 29.09, and 26.05 after its second round (H200, s44 c2 against s43
#: c1), so a 3% margin lost it 14%
SECOND_ROUND_STRUCTURES = 2
SECOND_ROUND_MARGIN = 0.10
#: the input program's own lowering (the floor a result must beat), when the cost model ranks
#: another candidate first, is timed at its default schedules (or its cached ones) only: a full
#: first round of its several library kernels took 5 s of mqa b=8's 38 s stage for a floor
#: 6.5x slower than the best candidate (H200, s37 c3), and left two candidates untuned. It gets
#: the full round, time allowing, when that time is within this factor of the fastest other
#: candidate's, where tuning might make it the winner
FLOOR_FULL_ROUND_WITHIN = 2.0


@dataclass
class VariantContext:
    """What the GPU stage needs to try size variants: the search space they come from, and the
    checks every returned μGraph passes (the verifier's verdict, the float64 re-check)."""

    config: SearchConfig
    verifier: Verifier
    recheck: FloatRecheck
    #: the GPU's SM count (which tile widths a split can still spread over the SMs)
    n_sm: int = H100_SMS
    #: the validation and timing inputs and the program's float64 outputs, drawn once for
    #: every μGraph the stage tunes (``autotune.tune``'s ``shared``)
    shared: dict[Any, Any] = field(default_factory=dict)


def _fastest_measured(accepted: Sequence[Optimized], program: KernelGraph,
                      n: int = GPU_VARIANT_STRUCTURES) -> list[Optimized]:
    """The ``n`` fastest measured structures that have sizes to vary (a graph-defined
    kernel), the input program's own lowering left out. (A μGraph of library kernels alone
    took one of rmsnorm b=8's two slots, and the fused structure measured third at its first
    size never had its other sizes measured.)"""
    return sorted((a for a in accepted if a.measured_us is not None and a.graph.key != program.key
                   and kernel_grids(a.graph)),
                  key=lambda a: a.measured_us or 0.0)[:n]


def _tune_one(graph: KernelGraph, program: KernelGraph, seed: int | None,
              estimated_us: float, deadline: float | None = None,
              start: Any = None, shared: dict[Any, Any] | None = None) -> Any:
    """The first tuning round (``start`` None: ranking candidates, no second round), or the
    second round from ``start``'s schedules (the winner's). ``shared``: the stage's inputs and
    float64 reference outputs, drawn once for every μGraph (``autotune.tune``)."""
    from mirage_formal.codegen.autotune import tune

    # every trial is logged with the μGraph and its estimate: data for the cost model
    return tune(graph, program, seed=seed or 0, deadline=deadline, refine=start is not None,
                start=start, shared=shared,
                context={"ugraph": ugraph_to_json(graph), "estimated_us": estimated_us})


def _slow_compiles_note(what: str, n: int) -> str:
    """The stage's note for a tuning that left ``n`` schedules' compiles unwaited for."""
    return f"{what}: {n} schedule(s) not measured (NVRTC not done within autotune.SLOW_COMPILE_S)"


class _StageDeadline:
    """The GPU stage's deadline, looking one step ahead: a step (tuning one μGraph, or
    verifying and tuning one size variant) is not begun unless the longest step so far would
    still end before the deadline. A b=8 attention variant's field verification alone takes
    seconds, so checking only the clock let the stage run 13 s past a 110 s budget.
    Call it for "out of time?"; wrap each step in :meth:`step`. ``reserve`` keeps that many
    more such steps free: the ranking and size-variant steps leave one for the winner's second
    tuning round (which tries the L2 policies; a budget the size variants used up used to
    skip it)."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.longest = 0.0
        #: the longest step that tuned each μGraph (by graph key)
        self.took: dict[str, float] = {}

    def __call__(self, reserve: int = 0, expect: float | None = None) -> bool:
        """Out of time for a step (and ``reserve`` more) as long as the longest so far, or
        as ``expect`` seconds where given."""
        step = self.longest if expect is None else expect
        return (self.deadline is not None
                and time.monotonic() + step * (1 + reserve) >= self.deadline)

    @contextlib.contextmanager
    def step(self, key: str | None = None) -> Iterator[None]:
        t = time.monotonic()
        try:
            yield
        finally:
            took = time.monotonic() - t
            self.longest = max(self.longest, took)
            if key is not None:
                self.took[key] = max(self.took.get(key, 0.0), took)


class _VerifyAhead:
    """Verifies and re-checks in float64 the size variants the stage will measure, on one
    daemon thread of its own with a twin of the stage's verifier (``Verifier.twin``: same
    trials and verdicts, caches of its own), in the order asked: the next variant's field
    verification runs while the current one is tuned. (The fused fp32 gated MLP at 512 rows:
    17-23 s to verify each size variant on a 2-core CPU, 12-19 s gaps between the sizes its
    stage measured, H200 s40 c4-c5.) A graph the stage needs that was not asked for goes to
    the front. The thread is a daemon and is never waited for beyond the verdicts the stage
    asks for, so the stage's budget holds; what it verified past the stage's end is dropped."""

    def __init__(self, ctx: VariantContext) -> None:
        self._verifier = ctx.verifier.twin()
        # (first on the thread: the reference in as many trials as the stage's verifier has
        # drawn, while the stage tunes its first candidates)
        self._warm = ctx.verifier.trials_drawn
        self._recheck = ctx.recheck
        self._lock = threading.Condition()
        self._queue: collections.deque[KernelGraph] = collections.deque()
        self._done: dict[str, tuple[Verdict, float] | BaseException] = {}
        self._asked: set[str] = set()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="verify-ahead", daemon=True)
        self._thread.start()

    def ask(self, graphs: Iterable[KernelGraph]) -> None:
        """Verify ``graphs`` after those asked before (each once)."""
        with self._lock:
            for g in graphs:
                if g.key not in self._asked:
                    self._asked.add(g.key)
                    self._queue.append(g)
            self._lock.notify()

    def result(self, g: KernelGraph, until: float | None = None) -> tuple[Verdict, float] | None:
        """``g``'s verdict and float64 error (inf when rejected), waiting for them, but not
        past ``until`` (a ``time.monotonic()`` value; None when it passes first: the stage's
        budget holds, and ``g`` stays queued); a graph not asked for yet is verified next.
        Re-raises what its verification raised."""
        with self._lock:
            if g.key not in self._asked:
                self._asked.add(g.key)
                self._queue.appendleft(g)
                self._lock.notify()
            while g.key not in self._done:
                if until is None:
                    self._lock.wait()
                    continue
                left = until - time.monotonic()
                if left <= 0:
                    return None
                self._lock.wait(timeout=left)
            got = self._done[g.key]
        if isinstance(got, BaseException):
            raise got
        return got

    def close(self) -> None:
        """Drop what is still queued; the thread ends after the verification it is running
        (not waited for), and with it the twin verifier's caches."""
        with self._lock:
            self._closed = True
            self._queue.clear()
            self._lock.notify_all()

    def _run(self) -> None:
        with contextlib.suppress(Exception):  # (a failure shows again in the first check)
            self._verifier.prepare(self._warm)
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._lock.wait()
                if self._closed:
                    return
                g = self._queue.popleft()
            got: tuple[Verdict, float] | BaseException
            try:
                verdict = self._verifier.check(g)
                err = self._recheck.error(g, verdict.output_map) if verdict.accepted else math.inf
                got = (verdict, err)
            except BaseException as e:  # (handed to the stage, which raises it where it asked)
                got = e
            with self._lock:
                self._done[g.key] = got
                self._lock.notify_all()


def _gpu_rank(program: KernelGraph, accepted: list[Optimized], top: int,
              seed: int | None, deadline: float | None = None,
              variants: VariantContext | None = None) -> tuple[list[Optimized], Any, list[str]]:
    """:func:`_rank`, with its verify-ahead thread (``variants`` given) closed after it."""
    # (started first: its verifier twin evaluates the reference while the first round tunes)
    ahead = _VerifyAhead(variants) if variants is not None else None
    try:
        return _rank(program, accepted, top, seed, deadline, variants, ahead)
    finally:
        if ahead is not None:
            ahead.close()


def _rank(program: KernelGraph, accepted: list[Optimized], top: int, seed: int | None,
          deadline: float | None, variants: VariantContext | None,
          ahead: _VerifyAhead | None) -> tuple[list[Optimized], Any, list[str]]:
    """Autotune, validate and time the ``top`` best (codegen.autotune: every kernel's schedule
    measured on this GPU, timed like the benchmarks' baselines); then, with ``variants``, the
    size variants of the fastest few (each verified and re-checked in float64 first; a faster
    one replaces its structure's entry), walks of their sizes, and with time left the same
    for the next fastest structures (up to ``GPU_MORE_STRUCTURES`` in all); re-rank by
    measured time."""
    notes: list[str] = []
    best_cg: Any = None
    best_us = math.inf
    #: the first round's schedules of each μGraph measured (a size variant's once it
    #: replaced its structure's entry): where the second round starts
    start_sched: dict[str, Any] = {}

    out_of_time = _StageDeadline(deadline)
    shared: dict[Any, Any] = variants.shared if variants is not None else {}
    picked = gpu_candidates(accepted, top, program)
    if picked and not out_of_time():
        # the program's validation draws and float64 outputs, once for every μGraph, before
        # the first step: its time would count as a tuning's in the steps planned after it
        from mirage_formal.codegen.autotune import VALIDATION_TRIALS
        from mirage_formal.codegen.validate import program_draws

        program_draws(program, VALIDATION_TRIALS, seed or 0, shared)
    def first_round(a: Optimized, quick: bool = False) -> None:
        """``a``'s first tuning round (``quick``: its first schedules only, a deadline of now)."""
        nonlocal best_us, best_cg
        with out_of_time.step(a.graph.key):
            tuned = _tune_one(a.graph, program, seed, a.cost.seconds * 1e6,
                              time.monotonic() if quick else deadline, shared=shared)
        if tuned is None:
            a.validation = "no schedule validated"
            notes.append(f"candidate {a.graph.key[:12]} FAILED validation under every schedule "
                         "(a codegen bug; see the tuning log measurements.jsonl)")
            return
        if tuned.slow_compiles:
            notes.append(_slow_compiles_note(f"candidate {a.graph.key[:12]}", tuned.slow_compiles))
        bad = [t for t in tuned.trials if not t.valid]
        for t in bad:
            notes.append(f"candidate {a.graph.key[:12]} schedule "
                         f"{'; '.join(s.short() for s in t.schedules.values())} FAILED: {t.error[:200]}")
        if a.measured_us is not None and tuned.us >= a.measured_us:
            # (a full round after the quick one that found nothing faster)
            a.validation = f"{a.validation}; a full first round found nothing faster"
            return
        a.measured_us = tuned.us
        a.schedule = tuned.describe()
        a.validation = (f"validated; {len(tuned.trials) - len(bad)} schedules timed"
                        + (" (cached winner)" if tuned.from_cache else "")
                        + (f"; opening schedule {tuned.default_us:.2f} µs" if tuned.default_us else "")
                        + ("; its first schedules only (the input's own lowering)" if quick else ""))
        start_sched[a.graph.key] = tuned.schedules
        if tuned.us < best_us:
            best_us, best_cg = tuned.us, tuned.compiled

    # the hedges' sizes (they depend on the accepted μGraphs only), chosen before the first
    # round so that their verification runs during its tuning (``_VerifyAhead``); measured
    # after it, in this order
    planned: list[tuple[list[tuple[Optimized, KernelGraph, Cost]], str]] = []
    if variants is not None and ahead is not None:
        ctx = variants
        grid_fill = grid_filling_variants(ctx.config, accepted, n_sm=ctx.n_sm)
        wgmma = wgmma_variants(ctx.config, accepted, n_sm=ctx.n_sm)
        # (the TF32 hedges enumerate and emit sizes, up to seconds of CPU: not begun unless a
        # step would still fit)
        tf32 = ([] if out_of_time(reserve=1) else
                tf32_variants(ctx.config, accepted, n_sm=ctx.n_sm))
        tf32_split = ([] if out_of_time(reserve=1) else
                      tf32_split_variants(ctx.config, accepted, n_sm=ctx.n_sm))
        planned = [(grid_fill, "grid-filling size"), (wgmma, "warpgroup-MMA size"),
                   (tf32, "TF32 size"), (tf32_split, "TF32 split size")]
        known = {a.graph.key for a in accepted}
        ahead.ask(v for vs, _ in planned for _, v, _ in vs if v.key not in known)
    floor: Optimized | None = None
    for i, a in enumerate(picked):
        if out_of_time(reserve=1):
            notes.append(f"budget spent: {len(picked) - i} candidate(s) not tuned or timed")
            break
        quick = i > 0 and a.graph.key == program.key
        first_round(a, quick)
        floor = a if quick else floor
    others = [a.measured_us for a in picked if a is not floor and a.measured_us is not None]
    if (floor is not None and floor.measured_us is not None
            and (not others or floor.measured_us <= FLOOR_FULL_ROUND_WITHIN * min(others))
            and not out_of_time(reserve=1)):
        first_round(floor)  # a floor that may win: its full first round
    if variants is not None:
        ctx = variants
        tried: set[str] = {a.graph.key for a in accepted}

        def measure(a: Optimized, vcs: Sequence[tuple[KernelGraph, Cost]], kind: str,
                    reserve: int = 1) -> None:
            nonlocal best_us, best_cg
            tried.update(v.key for v, _ in vcs)
            cg, us, more = _measure_variants(a, vcs, program, seed, ctx, out_of_time, start_sched,
                                             kind, reserve, ahead)
            notes.extend(more)
            if cg is not None and us < best_us:
                best_us, best_cg = us, cg

        hedges: list[tuple[Optimized, KernelGraph, Cost]] = []
        for vs, kind in planned:
            vs = [h for h in vs if h[1].key not in tried]  # (a size an earlier hedge measured)
            for a, v, c in vs:
                measure(a, [(v, c)], kind)
            hedges += vs
        for a in _fastest_measured(accepted, program, 1):
            # (fp32 loops: the fastest structure's own grids at longer loop ranges, before the
            # other sizes: two targeted variants that a 90 s budget never reached after them;
            # the prefill product's k 16 tiles, s40 c3)
            ranges = loop_range_variants(ctx.config, a.graph, tried)
            if ranges:
                measure(a, ranges, "loop range")
        # the fastest structures' size variants in turns (each one's first, then each one's
        # second...): a budget that ends early still measured the most likely sizes of each
        queues = [(a, variants_to_measure(ctx.config, a.graph, n_sm=ctx.n_sm))
                  for a in _fastest_measured(accepted, program)]
        turns = range(max((len(q) for _, q in queues), default=0))
        if ahead is not None:
            ahead.ask(q[t][0] for t in turns for _, q in queues if t < len(q))
        for turn in turns:
            for a, q in queues:
                if turn < len(q):
                    measure(a, q[turn:turn + 1], "size")
        # walk the fastest structures' sizes, and the grid-filling ones' (the model ranks their
        # sizes least reliably: gqa b=1's attention-plus-combine at 256 blocks measured 19.4 µs,
        # a neighbour at 128 blocks is Mirage's 11.5), each while a step finds a faster size
        def walk(a: Optimized) -> None:
            # (one step kept free beyond the second rounds' SECOND_ROUND_STRUCTURES: a second
            # round tries up to REFINE_MAX schedules, longer than a first-round step; rmsnorm
            # b=8's walk once left it no time, s26, and b=1's runner-up had none left in s35)
            reserve = 1 + SECOND_ROUND_STRUCTURES
            while not out_of_time(reserve=reserve):
                before = a.measured_us
                step = walk_step(ctx.config, a.graph, tried)
                if not step:
                    break
                measure(a, step, "walk", reserve=reserve)
                if a.measured_us is None or before is None or a.measured_us >= before:
                    break

        walkers = _fastest_measured(accepted, program)
        for a, _, _ in hedges:  # (a structure may be both a grid-filling and a wgmma hedge)
            if a.measured_us is not None and all(a is not w for w in walkers):
                walkers.append(a)
        for a in walkers:
            walk(a)
        # with time left, the next fastest structures get size variants and a walk too, one
        # at a time (rmsnorm b=8's fused kernel measured third at its first size and was
        # never walked, with 35 s of the stage's budget left)
        more = [a for a in _fastest_measured(accepted, program, GPU_MORE_STRUCTURES)
                if all(a is not w for w in walkers)]
        for a in more:
            if out_of_time(reserve=SECOND_ROUND_STRUCTURES):
                break
            measure(a, variants_to_measure(ctx.config, a.graph, n_sm=ctx.n_sm), "size")
            walk(a)
    # the tuner's second round (every kind of choice on its threads and split) for the
    # winner and for a runner-up within SECOND_ROUND_MARGIN of it: the first round ranks, the
    # second polishes. (rmsnorm b=1, H100 s35: the first round put a 128-column structure at
    # 24.37 µs and the 64-column one at 24.70, whose second round (a 2-deep ring, the fold on
    # the tensor cores) measures 24.2 against the other's best 24.4)
    ranked = sorted((a for a in accepted if a.measured_us is not None and a.graph.key in start_sched),
                    key=lambda a: a.measured_us or 0.0)
    second = ranked[:1] + [a for a in ranked[1:SECOND_ROUND_STRUCTURES]
                           if (a.measured_us or 0.0) <= (ranked[0].measured_us or 0.0) * (1 + SECOND_ROUND_MARGIN)]
    for j, win in enumerate(second):
        # (expected to take as long as the first round of the μGraph it refines, which
        # compiled about as many schedules as REFINE_MAX or more; not as long as the longest
        # step: one size variant of gated_mlp b=1 at 8 blocks took 56 s and cost its winner
        # the second round, H200 s41 c3)
        if out_of_time(expect=out_of_time.took.get(win.graph.key)):
            if j == 0:
                notes.append(f"budget spent: no second tuning round for {win.graph.key[:12]}")
            break
        with out_of_time.step():
            tuned = _tune_one(win.graph, program, seed, win.cost.seconds * 1e6, deadline,
                              start=start_sched[win.graph.key], shared=shared)
        if tuned is not None and win.measured_us is not None and tuned.us < win.measured_us:
            win.measured_us, win.schedule = tuned.us, tuned.describe()
            win.validation = f"{win.validation or 'validated'}; second tuning round {tuned.us:.2f} µs"
            if tuned.us < best_us:
                best_us, best_cg = tuned.us, tuned.compiled
    timed = sorted((a for a in accepted if a.measured_us is not None), key=lambda a: a.measured_us or 0.0)
    rest = [a for a in accepted if a.measured_us is None]
    return timed + rest, best_cg, list(dict.fromkeys(notes))  # (a note once, however often)


def _measure_variants(a: Optimized, vcs: Sequence[tuple[KernelGraph, Cost]], program: KernelGraph,
                      seed: int | None, ctx: VariantContext, out_of_time: _StageDeadline,
                      start_sched: dict[str, Any] | None = None,
                      kind: str = "size", reserve: int = 1,
                      ahead: _VerifyAhead | None = None) -> tuple[Any, float, list[str]]:
    """Verify, re-check and tune each size variant of ``vcs``; the fastest, if faster than
    ``a`` (or ``a`` was not measured), replaces ``a``'s graph, verdict, cost and measurements
    (same structure: it stays one entry). Returns its compiled kernel and time (None, inf when
    none was faster). No variant is begun unless ``reserve`` more steps would still fit.
    With ``ahead``, the verdicts come from its thread (all of ``vcs`` asked for at once, so
    the next one's verification runs during this one's tuning)."""
    notes: list[str] = []
    best: tuple[Any, float] = (None, math.inf)
    base_key = a.graph.key
    if ahead is not None:
        ahead.ask(v for v, _ in vcs)
    for v, c in vcs:
        if out_of_time(reserve=reserve):
            notes.append(f"budget spent: {kind} variants of {base_key[:12]} not all measured")
            break
        with out_of_time.step(v.key):
            if ahead is not None:
                got = ahead.result(v, out_of_time.deadline)
                if got is None:
                    notes.append(f"budget spent: {kind} variant {v.key[:12]} of {base_key[:12]} "
                                 "not verified in time")
                    break
                verdict, err = got
            else:
                verdict = ctx.verifier.check(v)
                err = ctx.recheck.error(v, verdict.output_map) if verdict.accepted else math.inf
            if not verdict.accepted or err > RECHECK_RTOL:
                # cannot happen for a sound structure: its variants compute the same function
                notes.append(f"{kind} variant {v.key[:12]} of {base_key[:12]} failed verification "
                             f"(accepted={verdict.accepted}, float64 error {err:.2g}); not used")
                continue
            tuned = _tune_one(v, program, seed, c.seconds * 1e6, out_of_time.deadline,
                              shared=ctx.shared)
            if tuned is not None and tuned.slow_compiles:
                notes.append(_slow_compiles_note(f"{kind} variant {v.key[:12]} of {base_key[:12]}",
                                                 tuned.slow_compiles))
            if tuned is None:
                notes.append(f"{kind} variant {v.key[:12]} of {base_key[:12]} FAILED validation under "
                             "every schedule (a codegen bug; see the tuning log)")
                continue
            if a.measured_us is None or tuned.us < a.measured_us:
                why = ("measured instead of" if a.measured_us is None else "faster on this GPU than")
                a.graph, a.verdict, a.cost, a.float64_error = v, verdict, c, err
                a.measured_us, a.schedule = tuned.us, tuned.describe()
                a.validation = (f"validated; {kind} variant of {base_key[:12]} ({why} the cost "
                                f"model's pick); {len(tuned.trials)} schedules timed")
                best = (tuned.compiled, tuned.us)
                if start_sched is not None:
                    start_sched[v.key] = tuned.schedules
    return best[0], best[1], notes
