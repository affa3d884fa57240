"""``superoptimize``: the one module that wires search, pruning, verification and codegen.

    result = mf.superoptimize(program, budget_s=600, bound=2**-64)
    result.best            # the best accepted μGraph (a KernelGraph)
    result.accepted        # every accepted μGraph, best first, with verdict, cost, float64 error
    result.kernel          # a callable compiled kernel of the best, when a GPU is present

Pipeline. The search (``search.run_search``) gets the Z3 oracle (``formal.Oracle``) as its
pruner and, as its checker, ``Chain(FloatScreen, Verifier)``: a float64 screen that rejects
most wrong candidates cheaply, then the prime-field verifier that decides, to ``bound``. Every
μGraph the search accepts is then re-checked in float64 on fresh inputs from an unrelated seed
(``verify.float64.FloatRecheck``); one that fails is moved to ``flagged`` and never
returned as accepted. Ranking is the search's analytic cost model. With a GPU, the ``gpu_top``
best accepted μGraphs are compiled with NVRTC, validated against the program in float64 on the
device, timed like the benchmarks' baselines (CUDA graph, L2 flushed), and re-ranked by
measured time; the fastest few structures then have their size variants (other grid sizes and
loop ranges of the space, each verified and re-checked like the rest) measured too, since the
cost model ranks tile shapes least reliably, and walk their sizes by measurement (each step
the nearest unmeasured sizes, while a step finds a faster one); ``kernel`` is the fastest one
that validated. Without a GPU the best μGraph is still compiled for sm_90 (compile-only), so a
code-generation failure is reported rather than discovered later.

May import every layer (only this module and the CLI do).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import os
import socket
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirage_formal.checkpoints import check_checkpoint
from mirage_formal.errors import CacheWarning, MirageError
from mirage_formal.formal import DEFAULT_SETS, Oracle
from mirage_formal.formal.cache import DiskCache
from mirage_formal.ir.graph import KERNEL_OP, KernelGraph
from mirage_formal.ir.serialize import atomic_write_text, dumps_ugraphs, ugraph_to_json
from mirage_formal.search import (
    Accepted,
    Chain,
    Cost,
    SearchConfig,
    SearchResult,
    check_program,
    derive_config,
    run_search,
)
from mirage_formal.search.cost import estimate
from mirage_formal.search.derive import H100_SMS
from mirage_formal.search.driver import check_budget
from mirage_formal.search.state import ranked_variants
from mirage_formal.verify import Verdict, Verifier
from mirage_formal.verify.float64 import FloatRecheck, FloatScreen

POST_SEARCH_SHARE = 0.1
"""The share of ``budget_s`` kept from the search for the float64 re-check and codegen."""
POST_SEARCH_MAX_S = 30.0
"""... but at most this many seconds."""
POST_SEARCH_GPU_SHARE = 0.4
"""With a GPU to tune on, the share kept for the float64 re-check and the GPU stage (every
candidate's schedules compiled, validated and timed: tens of seconds for ``gpu_top`` 8) ..."""
POST_SEARCH_GPU_MAX_S = 180.0
"""... but at most this many seconds."""
GPU_START_MARGIN_SHARE = 0.04
"""The GPU stage starts no tuning after ``deadline`` minus this share of the budget (at most
:data:`GPU_START_MARGIN_MAX_S`): a tuning always measures its first schedule (compile,
validate, time: seconds), so one begun just before the deadline would overrun it."""
GPU_START_MARGIN_MAX_S = 8.0


def _gpu_likely(gpu: bool | None) -> bool:
    """Whether the GPU stage will run, decided without initialising CUDA (the search forks
    its workers after this: a process holding a CUDA context should not fork)."""
    if gpu is not None:
        return gpu
    return os.path.exists("/dev/nvidiactl")

RECHECK_RTOL = 1e-6
"""A float64 re-check error above this (normwise, relative) flags an accepted μGraph. Equal
functions differ by rounding only (~1e-12 on the workloads); 1e-6 leaves room for
ill-conditioned but correct rewrites while catching any wrong one the field test let through."""
#: the most float64 re-checks run at once (threads; at most the search's worker count)
RECHECK_THREADS = 8


@dataclass
class Optimized:
    """One accepted μGraph with its evidence."""

    graph: KernelGraph
    verdict: Verdict
    cost: Cost
    found_at_s: float
    float64_error: float
    measured_us: float | None = None
    validation: str | None = None
    #: the tuned thread-level schedule of each kernel (GPU runs only)
    schedule: str | None = None

    def meta(self) -> dict[str, Any]:
        v = self.verdict
        return {"estimated_us": round(self.cost.seconds * 1e6, 3), "cost": self.cost.as_dict(),
                "found_at_s": round(self.found_at_s, 3),
                "verdict": {"accepted": v.accepted, "bound": v.bound, "trials": v.trials,
                            "theorem": v.theorem, "p": v.p, "q": v.q, "seed": v.seed},
                "float64_recheck_rel_error": self.float64_error,
                "measured_us": self.measured_us, "validation": self.validation,
                "schedule": self.schedule}


@dataclass
class OptimizeResult:
    """What :func:`superoptimize` returns (see the module doc)."""

    program: KernelGraph
    accepted: list[Optimized]
    flagged: list[Optimized]
    search: SearchResult
    oracle_stats: dict[str, Any]
    bound: float
    gpu: str | None = None
    kernel: Any = None
    codegen_notes: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    not_rechecked: list[Accepted] = field(default_factory=list)
    """Accepted by the search but not re-checked in float64 before the budget ran out."""
    program_cost: Cost | None = None
    """The input program's cost by the same model (the report's speedups are over it)."""
    notes: list[str] = field(default_factory=list)

    @property
    def best(self) -> KernelGraph | None:
        return self.accepted[0].graph if self.accepted else None

    def save(self, out_dir: str | Path) -> Path:
        """Write ``ugraphs.json`` (accepted μGraphs best-first, our format, readable by
        ``mirage-formal verify``) and ``report.md`` into ``out_dir``; returns the JSON path."""
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        p = d / "ugraphs.json"
        atomic_write_text(p, dumps_ugraphs([a.graph for a in self.accepted],
                                           [a.meta() for a in self.accepted]) + "\n")
        atomic_write_text(d / "report.md", self.report(drawing=_drawing(self, d)))
        return p

    def summary(self) -> dict[str, Any]:
        s = self.search.summary()
        return {**s, "resumed_units": self.search.extra.get("resumed_units", 0),
                "accepted": len(self.accepted), "flagged_float64": len(self.flagged),
                "gpu": self.gpu, "best_measured_us": self.accepted[0].measured_us if self.accepted else None,
                "seconds": {k: round(v, 3) for k, v in self.seconds.items()}}

    def report(self, drawing: str | None = None) -> str:
        """The report as Markdown (``drawing``: a file name of the best μGraph's picture)."""
        from mirage_formal.report import render

        return render(self, drawing)


def _drawing(res: OptimizeResult, d: Path) -> str | None:
    """Draw the best μGraph next to the report (SVG with graphviz, else its .dot source)."""
    if not res.accepted:
        return None
    from mirage_formal.draw import draw

    try:
        return draw(res.accepted[0].graph, d / "best.svg", quiet=True).name
    except MirageError:
        return None


def _progress(items: Sequence[Any], on: bool, desc: str) -> Any:
    if not on or not items:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit="μGraph", leave=False)


@dataclass(frozen=True)
class SearchComponents:
    """The search's pruner and checker as a picklable recipe, built where a worker runs (Ray
    workers cannot receive Z3 objects; each builds its own oracle once per search).

    The oracle's disk cache (``oracle_cache``) is *shared per machine*: workers on the machine
    that started the search (``host``) use that file itself (SQLite in WAL mode is safe for
    concurrent processes); workers on other machines use a cache file of their own in their
    temporary folder, named after the original path, so every node accumulates its decisions
    across runs. Node caches are not merged back: a decision is a deterministic function of the
    cache key, so a missing row costs only its Z3 time, while shipping rows would load the
    object store for no change in results.
    """

    program: KernelGraph
    axioms: tuple[str, ...]
    bound: float
    seed: int
    oracle_cache: str | None = None
    host: str = ""
    refresh: bool = False
    """Recompute every oracle decision and rewrite the cache (reads miss, writes replace)."""

    def cache_path(self) -> str | None:
        if self.oracle_cache is None:
            return None
        if socket.gethostname() == self.host:
            return self.oracle_cache
        tag = hashlib.sha256(f"{self.host}:{self.oracle_cache}".encode()).hexdigest()[:16]
        return str(Path(tempfile.gettempdir()) / "mirage-formal" / f"oracle-{tag}.sqlite")

    def __call__(self) -> tuple[Oracle, Chain]:
        path = self.cache_path()
        cache = DiskCache(path, reads=False) if self.refresh and path is not None else path
        oracle = Oracle(self.program, self.axioms, cache=cache)
        verifier = Verifier(self.program, bound=self.bound, seed=self.seed, float_check=False)
        return oracle, Chain(FloatScreen(self.program, self.seed), verifier)


def make_config(program: KernelGraph, preset: str | None = None,
                overrides: dict[str, Any] | None = None) -> SearchConfig:
    """The search space: derived from the program (``search.derive``), with the keys of
    ``preset`` (a shipped preset's name or a ``.toml`` path) and then ``overrides`` on top; a
    space that cannot express the program raises :class:`UnsupportedOpError`."""
    cfg = derive_config(program, preset, overrides=overrides)
    check_program(program, cfg)
    return cfg


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
#: other tiles, as many blocks as they make) of this many of the fastest measured structures ...
GPU_VARIANT_STRUCTURES = 2
#: ... this many each: the analytic cost model ranks tile shapes least reliably (rmsnorm's fused
#: kernel: 48-column tiles estimated best, 128-column tiles measured 27% faster)
GPU_VARIANTS = 4


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


def _kernel_grids(g: KernelGraph) -> tuple[tuple[tuple[int, int, int], int], ...]:
    """(grid, forloop) of each graph-defined kernel of ``g``."""
    return tuple((n.attr("graph").grid, n.attr("graph").forloop) for n in g.nodes
                 if n.op == KERNEL_OP)


def _grids(g: KernelGraph) -> tuple[tuple[int, int, int], ...]:
    return tuple(gr for gr, _ in _kernel_grids(g))


def variants_to_measure(config: SearchConfig, graph: KernelGraph,
                        limit: int = GPU_VARIANTS, n_sm: int = H100_SMS) -> list[tuple[KernelGraph, Cost]]:
    """Up to ``limit`` size variants of ``graph`` besides itself, one per grid: half the
    slots to the cost model's cheapest grids, the rest spread over tile widths from the
    widest whose loop the autotuner's split can still spread over the SMs (blocks x F/2 >=
    ``n_sm``: long contiguous rows per block, what the model ranks worst and DRAM may like
    best) towards the cheapest."""
    taken = {_grids(graph)}
    per_grid: list[tuple[KernelGraph, Cost]] = []
    for v, c in ranked_variants(config, graph):  # cheapest first: keep each grid's best
        if _grids(v) not in taken:
            taken.add(_grids(v))
            per_grid.append((v, c))
    cheap = per_grid[:max(1, limit // 2)]
    rest = [vc for vc in per_grid[len(cheap):] if _split_fills(vc[0], n_sm)]
    rest.sort(key=lambda vc: (_blocks(vc[0]), vc[1].seconds))
    spread: list[tuple[KernelGraph, Cost]] = []
    want = limit - len(cheap)
    if rest and want > 0:
        step = max(1, len(rest) // want)
        spread = rest[::step][:want]
    return cheap + spread


#: after the size variants, the fastest structures walk their sizes by measurement: each step
#: measures this many of the sizes near the current best (``space.size_distance`` at most
#: WALK_RADIUS: halve or double one or two of a kernel's grid axes and loop range), cheapest
#: by the cost model first, and moves to the fastest while a step finds a faster one. The cost
#: model misranks neighbouring sizes most (gqa b=1: Mirage's attention-plus-combine μGraph at
#: 64-row query tiles and 16 KV splits runs 11.1-11.9 µs on our codegen; the model ranks 16-row
#: tiles first and the stage measured only those)
WALK_WIDTH = 3
WALK_RADIUS = 2.0


def _looping_sizes(g: KernelGraph) -> tuple[tuple[tuple[int, int, int], int], ...]:
    """(grid, loop range) of ``g``'s looping kernels (of every kernel when none loops): the
    sizes a walk step tells apart (a split combine's grid barely moves the time)."""
    sizes = _kernel_grids(g)
    return tuple(s for s in sizes if s[1] > 1) or sizes


def walk_step(config: SearchConfig, graph: KernelGraph, tried: set[str],
              width: int = WALK_WIDTH, radius: float = WALK_RADIUS) -> list[tuple[KernelGraph, Cost]]:
    """Up to ``width`` size variants of ``graph`` near its own sizes (``radius``), none of
    ``tried`` (graph keys), one per sizes of its looping kernels, cheapest first."""
    step: list[tuple[KernelGraph, Cost]] = []
    taken = {_looping_sizes(graph)}
    for v, c in ranked_variants(config, graph, radius=radius):
        if v.key in tried or _looping_sizes(v) in taken:
            continue
        taken.add(_looping_sizes(v))
        step.append((v, c))
        if len(step) == width:
            break
    return step


#: the GPU stage also measures this many structures at their cheapest size whose grid alone
#: fills the SMs (no loop split): the cost model ranks a loop split by the schedule (S x the
#: blocks, fp32 partials and a serial combine) against a loop split by the grid (inputs re-read
#: through the L2 by more blocks) least reliably — gqa b=1: grid-split μGraphs estimated 27-30 µs
#: measured 16.7-18, schedule-split ones estimated 22.5 measured 22
GPU_GRID_FILLING = 2
#: ... found among this many of the cost model's best structures
GPU_GRID_FILLING_POOL = 32


def _grid_fills(g: KernelGraph, n_sm: int) -> bool:
    """Every looping kernel of ``g`` has at least ``n_sm`` blocks without a loop split."""
    return all(math.prod(gr) >= n_sm for gr, f in _kernel_grids(g) if f > 1)


def grid_filling_variants(config: SearchConfig, accepted: Sequence[Optimized],
                          limit: int = GPU_GRID_FILLING, pool: int = GPU_GRID_FILLING_POOL,
                          n_sm: int = H100_SMS) -> list[tuple[Optimized, KernelGraph, Cost]]:
    """Up to ``limit`` (structure, size variant, cost): among the first ``pool`` structures of
    ``accepted`` (best-first by cost) whose own size leaves some loop to a schedule split, each
    one's cheapest size variant whose grid fills ``n_sm`` SMs by itself; the cheapest
    ``limit`` of those."""
    found: list[tuple[Optimized, KernelGraph, Cost]] = []
    for a in accepted[:pool]:
        if _grid_fills(a.graph, n_sm):
            continue  # already fills the GPU at the size the model picked
        for v, c in ranked_variants(config, a.graph):  # cheapest first
            if _grid_fills(v, n_sm):
                found.append((a, v, c))
                break
    found.sort(key=lambda t: (t[2].seconds, t[1].key))
    return found[:limit]


def _blocks(g: KernelGraph) -> int:
    return sum(math.prod(gr) for gr in _grids(g))


def _split_fills(g: KernelGraph, n_sm: int) -> bool:
    """Every looping kernel of ``g`` reaches ``n_sm`` blocks when split (at most F/2 ways)."""
    return all(math.prod(gr) * max(1, f // 2) >= n_sm for gr, f in _kernel_grids(g) if f > 1)


def _fastest_measured(accepted: Sequence[Optimized], program: KernelGraph,
                      n: int = GPU_VARIANT_STRUCTURES) -> list[Optimized]:
    """The ``n`` fastest measured structures, the input program's own lowering left out."""
    return sorted((a for a in accepted if a.measured_us is not None and a.graph.key != program.key),
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

    def __call__(self, reserve: int = 0) -> bool:
        return (self.deadline is not None
                and time.monotonic() + self.longest * (1 + reserve) >= self.deadline)

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        t = time.monotonic()
        try:
            yield
        finally:
            self.longest = max(self.longest, time.monotonic() - t)


def _gpu_rank(program: KernelGraph, accepted: list[Optimized], top: int,
              seed: int | None, deadline: float | None = None,
              variants: VariantContext | None = None) -> tuple[list[Optimized], Any, list[str]]:
    """Autotune, validate and time the ``top`` best (codegen.autotune: every kernel's schedule
    measured on this GPU, timed like the benchmarks' baselines); then, with ``variants``, the
    size variants of the fastest few (each verified and re-checked in float64 first; a faster
    one replaces its structure's entry); re-rank by measured time."""
    notes: list[str] = []
    best_cg: Any = None
    best_us = math.inf
    #: the first round's schedules of each μGraph that was the fastest so far
    best_sched: dict[str, Any] = {}

    out_of_time = _StageDeadline(deadline)
    shared: dict[Any, Any] = variants.shared if variants is not None else {}
    picked = gpu_candidates(accepted, top, program)
    for i, a in enumerate(picked):
        if out_of_time(reserve=1):
            notes.append(f"budget spent: {len(picked) - i} candidate(s) not tuned or timed")
            break
        with out_of_time.step():
            tuned = _tune_one(a.graph, program, seed, a.cost.seconds * 1e6, deadline,
                              shared=shared)
        if tuned is None:
            a.validation = "no schedule validated"
            notes.append(f"candidate {a.graph.key[:12]} FAILED validation under every schedule "
                         "(a codegen bug; see the tuning log measurements.jsonl)")
            continue
        bad = [t for t in tuned.trials if not t.valid]
        for t in bad:
            notes.append(f"candidate {a.graph.key[:12]} schedule "
                         f"{'; '.join(s.short() for s in t.schedules.values())} FAILED: {t.error[:200]}")
        a.measured_us = tuned.us
        a.schedule = tuned.describe()
        a.validation = (f"validated; {len(tuned.trials) - len(bad)} schedules timed"
                        + (" (cached winner)" if tuned.from_cache else "")
                        + (f"; default schedule {tuned.default_us:.2f} µs" if tuned.default_us else ""))
        if tuned.us < best_us:
            best_us, best_cg = tuned.us, tuned.compiled
            best_sched[a.graph.key] = tuned.schedules
    if variants is not None:
        ctx = variants

        tried: set[str] = {a.graph.key for a in accepted}

        def measure(a: Optimized, vcs: Sequence[tuple[KernelGraph, Cost]], kind: str) -> None:
            nonlocal best_us, best_cg
            tried.update(v.key for v, _ in vcs)
            cg, us, more = _measure_variants(a, vcs, program, seed, ctx, out_of_time, best_sched,
                                             kind)
            notes.extend(more)
            if cg is not None and us < best_us:
                best_us, best_cg = us, cg

        hedges = grid_filling_variants(ctx.config, accepted, n_sm=ctx.n_sm)
        for a, v, c in hedges:
            measure(a, [(v, c)], "grid-filling size")
        for a in _fastest_measured(accepted, program):
            measure(a, variants_to_measure(ctx.config, a.graph, n_sm=ctx.n_sm), "size")
        # walk the fastest structures' sizes, and the grid-filling ones' (the model ranks their
        # sizes least reliably: gqa b=1's attention-plus-combine at 256 blocks measured 19.4 µs,
        # a neighbour at 128 blocks is Mirage's 11.5), each while a step finds a faster size
        walkers = _fastest_measured(accepted, program)
        walkers += [a for a, _, _ in hedges if a.measured_us is not None and all(a is not w for w in walkers)]
        for a in walkers:
            while not out_of_time(reserve=1):
                before = a.measured_us
                step = walk_step(ctx.config, a.graph, tried)
                if not step:
                    break
                measure(a, step, "walk")
                if a.measured_us is None or before is None or a.measured_us >= before:
                    break
    # the winner alone gets the tuner's second round (every kind of choice on its threads
    # and split): the first round ranks, the second polishes one μGraph
    win = min((a for a in accepted if a.measured_us is not None), key=lambda a: a.measured_us or 0.0,
              default=None)
    if win is not None and win.graph.key in best_sched and out_of_time():
        notes.append(f"budget spent: no second tuning round for {win.graph.key[:12]}")
    elif win is not None and win.graph.key in best_sched:
        with out_of_time.step():
            tuned = _tune_one(win.graph, program, seed, win.cost.seconds * 1e6, deadline,
                              start=best_sched[win.graph.key], shared=shared)
        if tuned is not None and win.measured_us is not None and tuned.us < win.measured_us:
            win.measured_us, win.schedule = tuned.us, tuned.describe()
            win.validation = f"{win.validation or 'validated'}; second tuning round {tuned.us:.2f} µs"
            if tuned.us < best_us:
                best_us, best_cg = tuned.us, tuned.compiled
    timed = sorted((a for a in accepted if a.measured_us is not None), key=lambda a: a.measured_us or 0.0)
    rest = [a for a in accepted if a.measured_us is None]
    return timed + rest, best_cg, notes


def _measure_variants(a: Optimized, vcs: Sequence[tuple[KernelGraph, Cost]], program: KernelGraph,
                      seed: int | None, ctx: VariantContext, out_of_time: _StageDeadline,
                      best_sched: dict[str, Any] | None = None,
                      kind: str = "size") -> tuple[Any, float, list[str]]:
    """Verify, re-check and tune each size variant of ``vcs``; the fastest, if faster than
    ``a`` (or ``a`` was not measured), replaces ``a``'s graph, verdict, cost and measurements
    (same structure: it stays one entry). Returns its compiled kernel and time (None, inf when
    none was faster)."""
    notes: list[str] = []
    best: tuple[Any, float] = (None, math.inf)
    base_key = a.graph.key
    for v, c in vcs:
        if out_of_time(reserve=1):
            notes.append(f"budget spent: {kind} variants of {base_key[:12]} not all measured")
            break
        with out_of_time.step():
            verdict = ctx.verifier.check(v)
            err = ctx.recheck.error(v, verdict.output_map) if verdict.accepted else math.inf
            if not verdict.accepted or err > RECHECK_RTOL:
                # cannot happen for a sound structure: its variants compute the same function
                notes.append(f"{kind} variant {v.key[:12]} of {base_key[:12]} failed verification "
                             f"(accepted={verdict.accepted}, float64 error {err:.2g}); not used")
                continue
            tuned = _tune_one(v, program, seed, c.seconds * 1e6, out_of_time.deadline,
                              shared=ctx.shared)
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
                if best_sched is not None:
                    best_sched[v.key] = tuned.schedules
    return best[0], best[1], notes


def _add_input_program(program: KernelGraph, target: str, verifier: Verifier,
                       accepted: list[Optimized]) -> None:
    """Make the input program itself (its direct lowering: one kernel per op) a candidate,
    ranked by cost among the others, unless the search already returned its structure: the
    result is then never worse than the input, and a search stopped before it accepted
    anything still yields a kernel. Its verdict is the verifier's identity verdict (no trials:
    it is the reference itself)."""
    if any(a.graph.key == program.key for a in accepted):
        return
    v = verifier.check(program)
    if not v.accepted:  # cannot happen: the identity verdict
        return
    o = Optimized(program, v, estimate(program, target), 0.0, 0.0)
    accepted.append(o)
    accepted.sort(key=lambda a: (a.cost.seconds, a.graph.key))


def _compile_only(best: Optimized) -> list[str]:
    from mirage_formal.codegen import CompileError, compile_graph

    try:
        cg = compile_graph(best.graph, arch="sm_90", load=False)
    except CompileError as e:
        best.validation = "compile error (sm_90)"
        return [f"best μGraph does not compile for sm_90: {e}"]
    best.validation = "compiled for sm_90 (no GPU: not validated)"
    return [f"best μGraph compiles for sm_90: {len(cg.kernels)} kernel(s), no GPU to validate on"]


def _gpu_stage_pool(found: Sequence[Accepted], gpu_top: int,
                    pool: int | None = None) -> tuple[list[Accepted], list[Accepted]]:
    """(head, tail) of the search's accepted μGraphs (best-first by cost): the head holds every
    one the GPU stage may pick (``gpu_candidates``: the first of each kernel count, then the
    cheapest; ``grid_filling_variants``: the first ``pool``), each list in the search's order."""
    pool = GPU_GRID_FILLING_POOL if pool is None else pool
    firsts: dict[int, Accepted] = {}
    for a in found:
        firsts.setdefault(len(a.graph.kernels), a)
    keep = {id(a) for a in found[:max(pool, gpu_top)]} | {id(a) for a in firsts.values()}
    return [a for a in found if id(a) in keep], [a for a in found if id(a) not in keep]


class _TailRecheck:
    """The float64 re-check of the accepted μGraphs the GPU stage does not pick from
    (``_gpu_stage_pool``'s tail), on threads of its own while the stage runs; ``join_into``
    waits for it and adds what it found to the result (passed ones among the unmeasured,
    which stay after the measured ones, best-first by cost). A μGraph restored from a checkpoint (no verdict object) is verified
    by a verifier of its own, built on first need: the stage's stays on the calling thread."""

    def __init__(self, tail: Sequence[Accepted], program: KernelGraph, bound: float, seed: int,
                 recheck: FloatRecheck | None, fits: Callable[[float], bool], threads: int) -> None:
        self._thread: ThreadPoolExecutor | None = None
        self._future: Future[tuple[list[Optimized], list[Optimized], list[Accepted]]] | None = None
        self.seconds = 0.0
        if not tail:
            return
        own: list[Verifier] = []

        def verifier() -> Verifier:
            if not own:
                own.append(Verifier(program, bound=bound, seed=seed, float_check=False))
            return own[0]

        def run() -> tuple[list[Optimized], list[Optimized], list[Accepted]]:
            t0 = time.monotonic()
            try:
                return _recheck_all(tail, _LazyVerifier(verifier), recheck, fits, threads)
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
    """``check`` of the verifier ``make`` builds when first needed."""

    def __init__(self, make: Callable[[], Verifier]) -> None:
        self.make = make

    def check(self, graph: KernelGraph) -> Verdict:
        return self.make().check(graph)


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


def superoptimize(program: KernelGraph, preset: str | None = None, *, budget_s: float | None = 600.0,
                  bound: float = 2.0 ** -64, axioms: Sequence[str] = DEFAULT_SETS,
                  workers: int | None = 1, checkpoint: str | Path | None = None, seed: int = 0,
                  progress: bool = False, gpu: bool | None = None, gpu_top: int = 8,
                  compile_best: bool = True, max_candidates: int | None = None,
                  oracle_cache: str | Path | None = None, overrides: dict[str, Any] | None = None,
                  executor: str | None = None, started_at: float | None = None) -> OptimizeResult:
    """Find μGraphs equivalent to ``program``, best first (see the module doc).

    The search space is derived from the program (``search.derive``); ``preset`` (a shipped
    preset's name or a ``.toml`` path) and ``overrides`` are applied on top, and a space that
    cannot express the program raises :class:`UnsupportedOpError`; ``budget_s`` bounds
    the search's wall time (None: run the space to the end); ``bound`` is the false-accept
    probability every accepted μGraph is verified to; ``axioms`` names the oracle's axiom sets;
    ``checkpoint`` is a file the search writes atomically and resumes from; ``gpu`` None means
    "use one if present". Bad input raises before any search work starts.

    ``budget_s`` is a hard cap on the whole call (from ``started_at``, a ``time.monotonic()``
    instant, default: now): setup, search, float64 re-check and code generation. The search
    gets what setup left minus a reserve (:data:`POST_SEARCH_SHARE` of the budget, at most
    :data:`POST_SEARCH_MAX_S`; with a GPU, :data:`POST_SEARCH_GPU_SHARE`, at most
    :data:`POST_SEARCH_GPU_MAX_S`, for the autotuner) for the phases after it; those stop at the deadline too
    (accepted μGraphs not re-checked by then are listed in ``not_rechecked``, code generation
    is skipped with a note). ``executor`` and ``workers`` pick where the search's units run
    (``"local"``/None: this machine's process pool; ``"ray"``, ``"ray:local"`` or a Ray
    address: Ray tasks, see docs/distributed.md).
    """
    if not isinstance(program, KernelGraph):
        raise MirageError(f"superoptimize takes a KernelGraph, not {type(program).__name__}; "
                          f"build one with mf.Graph() ... g.build()")
    if not 0.0 < bound < 1.0:
        raise MirageError(f"bound={bound!r} must be a probability strictly between 0 and 1")
    budget = check_budget(budget_s)
    start = time.monotonic() if started_at is None else started_at
    deadline = None if budget is None else start + budget
    timings: dict[str, float] = {}
    t = time.monotonic()
    cfg = make_config(program, preset, overrides)
    recipe = SearchComponents(program, tuple(axioms), bound, seed,
                              None if oracle_cache is None else str(Path(oracle_cache).resolve()),
                              socket.gethostname())
    oracle, checker = recipe()
    verifier = checker.checkers[-1]
    assert isinstance(verifier, Verifier)
    timings["setup"] = time.monotonic() - t

    t = time.monotonic()
    search_budget = None
    if deadline is not None and budget is not None:
        if _gpu_likely(gpu):
            reserve = min(POST_SEARCH_GPU_SHARE * budget, POST_SEARCH_GPU_MAX_S)
        else:
            reserve = min(POST_SEARCH_SHARE * budget, POST_SEARCH_MAX_S)
        search_budget = max(deadline - reserve - time.monotonic(), 1e-3)
    if checkpoint is not None:
        check_checkpoint(Path(checkpoint))
    res = run_search(program, cfg, oracle, checker, checkpoint=checkpoint, workers=workers,
                     progress=progress, budget_s=search_budget, max_candidates=max_candidates,
                     executor=executor, components=recipe)
    notes: list[str] = []
    hits = res.stats.pruner_tiers.get("disk_hits", 0)
    if not res.accepted and recipe.oracle_cache is not None and hits and res.complete:
        # Nothing accepted, and some prunes came from the disk cache: a damaged cache (or one
        # whose checksums were forged) could be the cause. Ask every query again, uncached.
        msg = (f"0 accepted after {hits} oracle decisions read from the cache {oracle_cache}; "
               "searching again with every decision recomputed (the cache is rewritten)")
        warnings.warn(msg, CacheWarning, stacklevel=2)
        notes.append(msg)
        if checkpoint is not None:
            Path(checkpoint).unlink(missing_ok=True)
        recipe = dataclasses.replace(recipe, refresh=True)
        oracle, checker = recipe()
        if deadline is not None and budget is not None:
            search_budget = max(deadline - min(POST_SEARCH_SHARE * budget, POST_SEARCH_MAX_S)
                                - time.monotonic(), 1e-3)
        res = run_search(program, cfg, oracle, checker, checkpoint=checkpoint, workers=workers,
                         progress=progress, budget_s=search_budget, max_candidates=max_candidates,
                         executor=executor, components=recipe)
    timings["search"] = time.monotonic() - t

    def time_left() -> bool:
        return deadline is None or time.monotonic() < deadline

    t = time.monotonic()
    recheck = FloatRecheck(program) if res.accepted and time_left() else None
    threads = max(1, min(RECHECK_THREADS, workers or 1))

    def fits(need: float) -> bool:
        return deadline is None or time.monotonic() + need < deadline

    # With a GPU, only the μGraphs the GPU stage may pick are re-checked before it starts; the
    # rest are re-checked on other threads while it runs, and join the result after it
    head, tail = (_gpu_stage_pool(res.accepted, gpu_top) if _gpu_likely(gpu)
                  else (list(res.accepted), []))
    accepted, flagged, unchecked = _recheck_all(
        _progress(head, progress, "float64 re-check"), verifier, recheck, fits, threads)
    background = _TailRecheck(tail, program, bound, seed, recheck, fits, threads)
    _add_input_program(program, cfg.target, verifier, accepted)
    timings["float64_recheck"] = time.monotonic() - t

    out = OptimizeResult(program, accepted, flagged, res, dict(res.stats.pruner_tiers), bound,
                         seconds=timings, not_rechecked=unchecked,
                         program_cost=estimate(program, cfg.target), notes=notes)
    try:
        _codegen_stage(out, program, cfg, verifier, recheck, gpu, gpu_top, seed, deadline, budget,
                       compile_best, progress)
    finally:
        background.join_into(out)
        if out.not_rechecked:
            out.codegen_notes.append(f"budget spent: {len(out.not_rechecked)} accepted μGraph(s) not "
                                     "re-checked in float64 (not returned; run again with a larger "
                                     "--budget)")
    return out


def _codegen_stage(out: OptimizeResult, program: KernelGraph, cfg: SearchConfig, verifier: Verifier,
                   recheck: FloatRecheck | None, gpu: bool | None, gpu_top: int, seed: int,
                   deadline: float | None, budget: float | None, compile_best: bool,
                   progress: bool) -> None:
    """superoptimize's last phase, on ``out`` in place: with a GPU, autotune, validate, time and
    re-rank the best (``_gpu_rank``); without one, compile the best for sm_90."""
    accepted, timings = out.accepted, out.seconds
    if not accepted:
        return
    if deadline is not None and time.monotonic() >= deadline:
        out.codegen_notes.append("budget spent: code generation skipped")
        return
    t = time.monotonic()
    if gpu is None or gpu:
        from mirage_formal.codegen import gpu_available

        have = gpu_available()
        if gpu and not have:
            from mirage_formal.codegen import NoGPUError

            raise NoGPUError("gpu=True but no CUDA GPU/driver is usable here; pass gpu=None or "
                             "False to rank by the cost model")
        gpu = have
    if progress:
        print("compiling the best μGraph" + (f" and up to {gpu_top} more, validating and timing"
                                              if gpu else " (compile only: no GPU)") + " ...",
              flush=True)
    if gpu:
        from mirage_formal.codegen.runtime import runtime

        out.gpu = runtime().name
        ctx = VariantContext(cfg, verifier, recheck or FloatRecheck(program))
        gpu_deadline = (None if deadline is None or budget is None else
                        deadline - min(GPU_START_MARGIN_SHARE * budget, GPU_START_MARGIN_MAX_S))
        out.accepted, out.kernel, notes = _gpu_rank(program, accepted, gpu_top, seed, gpu_deadline,
                                                    ctx)
        out.codegen_notes += notes
        timings["gpu"] = time.monotonic() - t
    elif compile_best:
        out.codegen_notes += _compile_only(accepted[0])
        timings["compile"] = time.monotonic() - t

