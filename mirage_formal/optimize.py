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

The GPU stage lives in ``gpu_stage``, the float64 re-check in ``recheck``, the result record
in ``optimized``.

May import every layer (only this module, ``gpu_stage`` and the CLI do; ``recheck`` imports
no codegen).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import socket
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirage_formal.checkpoints import check_checkpoint
from mirage_formal.errors import CacheWarning, MirageError
from mirage_formal.formal import DEFAULT_SETS, Oracle
from mirage_formal.formal.cache import DiskCache
from mirage_formal.gpu_stage import VariantContext, _gpu_rank
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.serialize import atomic_write_text, dumps_ugraphs
from mirage_formal.optimized import Optimized
from mirage_formal.recheck import RECHECK_THREADS, _gpu_stage_pool, _recheck_all, _TailRecheck
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
from mirage_formal.search.driver import check_budget
from mirage_formal.verify import Verifier
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
        _progress(head, progress, "float64 re-check"), verifier, recheck, fits, threads,
        processes=True)
    # (half the threads: the GPU stage's compiles and validations share the cores)
    background = _TailRecheck(tail, program, bound, seed, recheck, fits, max(1, threads // 2))
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
        if gpu or (gpu is None and _gpu_likely(gpu)) or compile_best:
            # (only where code generation would have run: gpu=False with compile_best=False
            # asks for none, and a note saying it was skipped misled a reader of the result)
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
        from mirage_formal.codegen.autotune import device_sm_count
        from mirage_formal.codegen.runtime import runtime

        rt = runtime()
        out.gpu = rt.name
        # size variants fill this GPU's SMs (a wave of 132 blocks is two on a 114-SM H100 PCIe)
        ctx = VariantContext(cfg, verifier, recheck or FloatRecheck(program), n_sm=device_sm_count(rt))
        gpu_deadline = (None if deadline is None or budget is None else
                        deadline - min(GPU_START_MARGIN_SHARE * budget, GPU_START_MARGIN_MAX_S))
        out.accepted, out.kernel, notes = _gpu_rank(program, accepted, gpu_top, seed, gpu_deadline,
                                                    ctx)
        out.codegen_notes += notes
        timings["gpu"] = time.monotonic() - t
    elif compile_best:
        out.codegen_notes += _compile_only(accepted[0])
        timings["compile"] = time.monotonic() - t

