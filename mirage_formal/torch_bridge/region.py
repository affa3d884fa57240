"""One superoptimized region: find (or load) its μGraph, then run it as a kernel or with torch.

:func:`compile_region` translates a fused region submodule into a program, looks the program up
in the :class:`RegionCache`, and on a miss runs :func:`mirage_formal.superoptimize` on it (with
the user's budget) and stores the chosen μGraph. With a usable GPU, and CUDA tensors of
f16/bf16/f32 at every region input, the μGraph is compiled (the search's autotuned kernel, or
the autotuner run on the cached μGraph, whose own cache keeps the winning schedule), validated
against the float64 program on random inputs *and* against torch on the example inputs, and
timed against the region's torch code on those inputs (:func:`time_like_benchmarks`, both the
same way); the faster one runs (``SearchSettings.prefer_faster``). As a kernel: inputs are
the caller's tensors (a transposed parameter is transposed once and kept while the parameter
is unchanged; other non-contiguous inputs are made contiguous), outputs are fresh torch
tensors, and the launch goes on torch's current stream (no copies, no
synchronization). Anything else — no GPU, a translation the search cannot take, a kernel that
fails validation or is slower than torch — leaves the region to torch, with one warning line
saying why.

Imports torch, ``translate``, ``cache``, ``optimize`` and ``codegen`` (the last two lazily).
"""

from __future__ import annotations

import os
import statistics
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from mirage_formal.errors import MirageError
from mirage_formal.ir.graph import INPUT, KernelGraph
from mirage_formal.torch_bridge import DEFAULT_BUDGET_S
from mirage_formal.torch_bridge.cache import RegionCache
from mirage_formal.torch_bridge.translate import TORCH_DTYPE, Translation, Translator


class FallbackWarning(UserWarning):
    """A region runs with torch instead of a superoptimized kernel."""


@dataclass(frozen=True)
class SearchSettings:
    """What the search of one region is given (part of the cache key, except the budget)."""

    budget_s: float = DEFAULT_BUDGET_S
    bound: float = 2.0**-64
    preset: str | None = None
    overrides: tuple[tuple[str, Any], ...] = ()
    gpu: bool | None = None
    validate_trials: int = 1
    seed: int = 0
    #: accepted μGraphs autotuned and timed on the GPU (the search's gpu_top)
    gpu_top: int = 8
    #: search processes (None: :func:`default_workers`); not part of the cache key, since the
    #: search's result does not depend on how many processes ran its units
    workers: int | None = None
    #: time the validated kernel against the region's torch code on the example inputs and
    #: run whichever is faster (:func:`time_like_benchmarks`)
    prefer_faster: bool = True

    def key_material(self) -> dict[str, Any]:
        return {"bound": self.bound, "preset": self.preset, "overrides": list(self.overrides)}


@dataclass
class RegionReport:
    """What happened to one region (for users, tests and the benchmark)."""

    name: str
    ops: int
    program: KernelGraph | None = None
    ugraph: KernelGraph | None = None
    source: str = ""  # "cache", "search", "program" (search found nothing) or ""
    runs_on: str = "torch"  # "kernel" or "torch"
    reason: str = ""  # why it runs with torch
    seconds: dict[str, float] = field(default_factory=dict)
    kernels: str = ""  # the compiled kernels' summary (GPU)
    schedule: str = ""  # the autotuned schedule (GPU, μGraph from the cache)
    validation: str = ""
    #: the kernel's and the region's torch code's median µs on the example inputs (GPU,
    #: ``prefer_faster``); None when not timed
    kernel_us: float | None = None
    torch_us: float | None = None
    timing: str = ""  # how they were timed, or why they were not
    #: this process's search of the region (empty when the μGraph came from the cache): its
    #: budget, accepted count, seconds by phase, units, the GPU stage's measured candidates
    #: and its notes (what the budget left out)
    search: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        how = "superoptimized kernel" if self.runs_on == "kernel" else f"torch ({self.reason})"
        return f"{self.name}: {self.ops} ops -> {how}; μGraph from {self.source or '-'}"


def _count_ops(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method"))


#: the most search processes a region's search starts by default
MAX_DEFAULT_WORKERS = 16


def default_workers() -> int:
    """This machine's cores less one (the caller's own process), at least 1 and at most
    :data:`MAX_DEFAULT_WORKERS`. One process had searched each region of a ViT block for its
    whole budget on the device's 16 cores, and found kernels 2-25x slower than the benchmark
    rows' searches of the same programs on 15 (s52 c1)."""
    return max(1, min(MAX_DEFAULT_WORKERS, (os.cpu_count() or 1) - 1))


def _search(
    program: KernelGraph, s: SearchSettings, gpu: bool
) -> tuple[KernelGraph, Any, str, dict[str, Any]]:
    """superoptimize ``program``; returns (μGraph, kernel or None, source, meta)."""
    from mirage_formal.errors import UnsupportedOpError
    from mirage_formal.optimize import make_config, superoptimize
    from mirage_formal.search import SearchConfig, default_preset

    overrides = dict(s.overrides)
    kw: dict[str, Any] = {
        "budget_s": s.budget_s,
        "bound": s.bound,
        "gpu": gpu,
        "compile_best": False,
        "seed": s.seed,
        "gpu_top": s.gpu_top,
        "workers": default_workers() if s.workers is None else s.workers,
    }
    try:
        make_config(program, s.preset, overrides)
    except UnsupportedOpError:
        # the preset lacks some of the region's ops: let the kernel level use all of them
        base = SearchConfig.from_preset(s.preset or default_preset(program), **overrides)
        ops = sorted({n.op for n in program.nodes if n.op != INPUT} | set(base.kernel_ops))
        overrides = {**overrides, "kernel_ops": ops}
    res = superoptimize(program, s.preset, overrides=overrides, **kw)
    summary = res.search.summary()
    meta: dict[str, Any] = {
        "budget_s": s.budget_s,
        "accepted": len(res.accepted),
        "gpu": res.gpu,
        "seconds": {k: round(v, 3) for k, v in res.seconds.items()},
        "stopped": summary.get("stopped"),
        "units": summary.get("units"),
        # what the GPU stage measured and what it left out (budget notes): why a region's
        # kernel is the one it is
        "gpu_measured_us": [{"ugraph": a.graph.key[:12], "kernels": len(a.graph.kernels),
                             "estimated_us": round(a.cost.seconds * 1e6, 2),
                             "measured_us": round(a.measured_us, 2)}
                            for a in res.accepted if a.measured_us is not None],
        "codegen_notes": list(res.codegen_notes),
    }
    if res.kernel is not None:
        best = res.accepted[0]
        meta |= {"measured_us": best.measured_us, "bound": best.verdict.bound}
        return res.kernel.graph, res.kernel, "search", meta
    if res.accepted:
        best = res.accepted[0]
        meta |= {"bound": best.verdict.bound, "estimated_us": best.cost.seconds * 1e6}
        return best.graph, None, "search", meta
    return program, None, "program", meta


#: bytes written before each timed replay to evict the L2 (as the benchmarks and
#: ``codegen.timing`` do)
FLUSH_BYTES = 256 * 1024 * 1024


def time_like_benchmarks(fn: Any, reps: int = 50) -> float:
    """Median µs of ``fn()`` as the benchmarks time PyTorch: three warm-up calls on a side
    stream, one call captured in a CUDA graph, ``reps`` replays with a 256 MB write (the L2
    flush) before each, CUDA events around each replay."""
    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    event = torch.cuda.Event
    marks = [(event(enable_timing=True), event(enable_timing=True))  # type: ignore[no-untyped-call]
             for _ in range(reps)]
    for start, end in marks:
        flush.zero_()
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    return 1000.0 * statistics.median(start.elapsed_time(end) for start, end in marks)


def _gpu_ready(s: SearchSettings, args: tuple[Any, ...]) -> str:
    """'' when the region can run as a kernel here, else why not."""
    if s.gpu is False:
        return "gpu=False"
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors or not all(t.is_cuda for t in tensors):
        return "no GPU" if not torch.cuda.is_available() else "its inputs are not CUDA tensors"
    if any(t.dtype not in (torch.float16, torch.bfloat16, torch.float32) for t in tensors):
        return "an input is not float16/bfloat16/float32"
    from mirage_formal.codegen import gpu_available

    return "" if gpu_available() else "no CUDA driver usable by mirage-formal"


class Region(torch.nn.Module):
    """Replaces a fused region submodule: runs the kernel, or the original submodule."""

    def __init__(
        self,
        fallback: torch.fx.GraphModule,
        report: RegionReport,
        translation: Translation | None = None,
        kernel: Any = None,
    ) -> None:
        super().__init__()
        self.fallback = fallback
        self.report = report
        self.translation = translation
        self.kernel = kernel
        self._transposed: dict[int, tuple[tuple[int, int], torch.Tensor]] = {}

    def _operand(self, arg: int, t: torch.Tensor, transposed: bool) -> torch.Tensor:
        if transposed:
            if not isinstance(t, torch.nn.Parameter):
                return t.mT.contiguous()
            # a parameter is transposed once, and again only after it changes
            stamp = (t.data_ptr(), t._version)
            hit = self._transposed.get(arg)
            if hit is None or hit[0] != stamp:
                hit = self._transposed[arg] = (stamp, t.detach().mT.contiguous())
            return hit[1]
        if t.data_ptr() % 16:
            return t.clone()
        return t if t.is_contiguous() else t.contiguous()

    def run_kernel(self, *args: Any) -> Any:
        tr = self.translation
        assert tr is not None and self.kernel is not None
        ins = [self._operand(b.arg, args[b.arg], b.transposed) for b in tr.inputs]
        dev = ins[0].device
        outs = [
            torch.empty(n.shape, dtype=TORCH_DTYPE[n.dtype], device=dev) for n in tr.program.outputs
        ]
        stream = torch.cuda.current_stream(dev).cuda_stream
        self.kernel.launch([t.data_ptr() for t in ins], [o.data_ptr() for o in outs], stream)
        res = tuple(
            o if o.dtype == dt else o.to(dt) for o, dt in zip(outs, tr.out_dtypes, strict=True)
        )
        return res if self._tuple_out else res[0]

    @property
    def _tuple_out(self) -> bool:
        (out,) = [n for n in self.fallback.graph.nodes if n.op == "output"]
        return isinstance(out.args[0], (tuple, list))

    def forward(self, *args: Any) -> Any:
        if self.kernel is not None:
            return self.run_kernel(*args)
        return self.fallback(*args)


def _agrees(got: Any, want: Any, rtol: Mapping[torch.dtype, float]) -> tuple[bool, float]:
    gs = got if isinstance(got, tuple) else (got,)
    ws = want if isinstance(want, (tuple, list)) else (want,)
    worst = 0.0
    for g, w in zip(gs, ws, strict=True):
        w64, g64 = w.detach().double(), g.detach().double()
        scale = float(w64.abs().max()) or 1.0
        err = float((g64 - w64).abs().max()) / scale if w64.numel() else 0.0
        if not err <= rtol.get(w.dtype, 2e-2):
            return False, err
        worst = max(worst, err)
    return True, worst


_RTOL = {torch.float16: 2e-2, torch.bfloat16: 5e-2, torch.float32: 1e-3}


def compile_region(
    name: str,
    gm: torch.fx.GraphModule,
    args: tuple[Any, ...],
    s: SearchSettings,
    cache: RegionCache,
    version: str,
    warn: bool = True,
) -> Region:
    """Translate, superoptimize (or load), validate; returns the region's runner."""
    report = RegionReport(name, _count_ops(gm))
    t0 = time.monotonic()

    def fallback(reason: str, translation: Translation | None = None) -> Region:
        report.runs_on, report.reason = "torch", reason
        report.seconds["total"] = time.monotonic() - t0
        if warn:
            # warn_explicit with a pseudo file name: one line, no source line under it
            warnings.warn_explicit(
                f"{name} ({report.ops} ops) runs with torch: {reason}",
                FallbackWarning,
                "mirage_formal",
                0,
            )
        return Region(gm, report, translation)

    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    try:
        tr = Translator(gm, names).run()
    except MirageError as e:
        return fallback(f"translation failed: {str(e).splitlines()[0]}")
    report.program = tr.program
    why_not_gpu = _gpu_ready(s, args)
    gpu = not why_not_gpu
    arch = "cpu"
    if gpu:
        from mirage_formal.codegen.runtime import runtime

        arch = runtime().arch
    key = cache.key(tr.program, arch, version, s.key_material())
    hit = cache.get(key, tr.program)
    kernel = None
    if hit is not None and hit.budget_s >= s.budget_s:
        ugraph, report.source = hit.graph, "cache"
    else:
        t = time.monotonic()
        try:
            ugraph, kernel, report.source, meta = _search(tr.program, s, gpu)
        except MirageError as e:
            ugraph, report.source = tr.program, "program"
            meta = {"budget_s": s.budget_s, "search_error": str(e).splitlines()[0]}
        report.seconds["search"] = time.monotonic() - t
        report.search = meta
        cache.put(key, ugraph, meta)
    report.ugraph = ugraph
    if not gpu:
        return fallback(f"{why_not_gpu}; its verified μGraph is cached", tr)
    from mirage_formal.codegen import validate
    from mirage_formal.codegen.autotune import tune

    t = time.monotonic()
    try:
        if kernel is None:
            # the autotuner's own cache holds the winning schedule after the first process
            tuned = tune(ugraph, tr.program, seed=s.seed)
            if tuned is None:
                return fallback("no schedule of its μGraph validated on this GPU", tr)
            kernel = tuned.compiled
            report.schedule = tuned.describe() + (" (cached)" if tuned.from_cache else "")
        rep = validate(kernel, tr.program, trials=s.validate_trials, seed=s.seed)
    except MirageError as e:
        return fallback(f"kernel failed to build or run: {str(e).splitlines()[0]}", tr)
    report.validation = str(rep)
    if not rep.ok:
        return fallback(f"kernel failed validation against the program: {rep}", tr)
    report.kernels = kernel.summary()  # (kept when it loses to torch below: says what lost)
    region = Region(gm, report, tr, kernel)
    with torch.no_grad():
        got = region.run_kernel(*args)
        want = gm(*args)
    ok, err = _agrees(got, want, _RTOL)
    report.validation += f"; vs torch on the example inputs: max-relative error {err:.2e}"
    if not ok:
        return fallback(f"kernel disagrees with torch on the example inputs (error {err:.2e})", tr)
    if s.prefer_faster:
        # the same timer for both, on the caller's example inputs: the kernel as the region
        # runs it (operand transposes and dtype conversions included), torch as it would
        try:
            with torch.no_grad():
                report.kernel_us = time_like_benchmarks(lambda: region.run_kernel(*args))
                report.torch_us = time_like_benchmarks(lambda: gm(*args))
            report.timing = "CUDA graph of one call, L2 flushed before each of 50 replays, median"
        except (RuntimeError, MirageError) as e:  # (a region torch cannot capture in a graph)
            report.kernel_us = report.torch_us = None
            report.timing = f"not compared with torch: {str(e).splitlines()[0][:200]}"
        if (report.kernel_us is not None and report.torch_us is not None
                and report.torch_us < report.kernel_us):
            report.seconds["gpu_setup"] = time.monotonic() - t
            return fallback(f"its kernel measured {report.kernel_us:.1f} µs against torch's "
                            f"{report.torch_us:.1f} µs on this GPU ({report.timing})", tr)
    report.runs_on = "kernel"
    report.seconds["gpu_setup"] = time.monotonic() - t
    report.seconds["total"] = time.monotonic() - t0
    return region
