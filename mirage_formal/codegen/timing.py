"""Timing compiled kernel graphs with CUDA events, and picking the fastest verified one.

:func:`time_graph` launches the graph ``warmup`` times, then times ``reps`` runs one by one
between two events each and returns the median in microseconds; with ``graph=True`` the
launches are captured once into a CUDA graph (driver stream capture) and the replays are
timed instead, which removes the per-launch host overhead. Inputs are device arrays filled
once with fresh uniform random values (never zeros). :func:`fastest` validates every
candidate first and times only those that pass.

Imports the rest of ``codegen`` (and ``semantics`` through validation).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mirage_formal.codegen.compiled import CompiledGraph
from mirage_formal.codegen.nvrtc import compile_cubin
from mirage_formal.codegen.runtime import DeviceArray, Runtime
from mirage_formal.codegen.validate import ValidationReport, random_device_inputs, validate
from mirage_formal.errors import MirageError
from mirage_formal.ir.dtypes import DType
from mirage_formal.ir.graph import KernelGraph


def device_inputs(compiled: CompiledGraph, seed: int | None = None) -> list[DeviceArray]:
    xs = random_device_inputs(compiled.graph, np.random.default_rng(seed))
    outs = []
    for n, x in zip(compiled.graph.inputs, xs, strict=True):
        d = DeviceArray(n.shape, n.dtype)
        d.copy_from(x)
        outs.append(d)
    return outs


#: bytes written between timed runs to evict the L2 (triton's do_bench uses 256 MB too)
FLUSH_BYTES = 256 * 1024 * 1024
_flush: dict[int, DeviceArray] = {}
#: how the flush writes its 256 MB: ``memset`` (the driver's cuMemsetD32Async) or ``fill``
#: (a kernel of 128-thread blocks, one 16-byte store per thread, the shape of PyTorch's
#: ``zero_``, which triton's do_bench runs). The two may leave the L2 in different states: the
#: table's rows measured up to 0.9 µs more under do_bench than under the memset (s24).
#: ``MF_FLUSH`` in the environment picks one for the whole process (an A/B of the timing
#: method, ``benchmarks/timing_agreement.py``)
FLUSH_METHODS = ("memset", "fill")
FLUSH_FILL_SOURCE = """
extern "C" __global__ void __launch_bounds__(128) mf_flush_fill(uint4* p) {
  p[(size_t)blockIdx.x * 128 + threadIdx.x] = make_uint4(0u, 0u, 0u, 0u);
}
"""
_fill_fn: dict[int, object] = {}


def flush_method() -> str:
    """The flush ``time_graph`` uses: ``MF_FLUSH`` if set (``memset`` or ``fill``), else memset."""
    m = os.environ.get("MF_FLUSH", "memset")
    if m not in FLUSH_METHODS:
        raise MirageError(f"MF_FLUSH={m!r}: expected one of {', '.join(FLUSH_METHODS)}")
    return m


def write_flush(rt: Runtime, stream: int, method: str | None = None) -> None:
    """Write the 256 MB flush buffer on ``stream`` (see :data:`FLUSH_METHODS`)."""
    fl = _flush_buffer(rt)
    if (method or flush_method()) == "memset":
        rt.ck(rt.drv.cuMemsetD32Async(fl.ptr, 0, FLUSH_BYTES // 4, stream), "cuMemsetD32Async")
        return
    f = _fill_fn.get(id(rt))
    if f is None:
        f = _fill_fn[id(rt)] = rt.function(rt.load(compile_cubin(FLUSH_FILL_SOURCE, rt.arch,
                                                                 name="mf_flush.cu")),
                                           "mf_flush_fill", 0)
    rt.launch(f, (FLUSH_BYTES // (16 * 128), 1, 1), 128, 0, stream, [fl.ptr])


def _flush_buffer(rt: Runtime) -> DeviceArray:
    b = _flush.get(id(rt))
    if b is None:
        b = _flush[id(rt)] = DeviceArray((FLUSH_BYTES // 4,), DType.F32, rt)
    return b


def time_launch(rt: Runtime, stream: int, launch: Callable[[], None],
                flush: Callable[[], None] | None = None, reps: int = 100) -> float:
    """Median microseconds of ``launch()`` (any launches on ``stream``) timed as the table
    times a kernel: a CUDA graph of it, replayed ``reps`` times after 5 warm replays, each
    after ``flush()`` (default: :func:`write_flush`'s 256 MB), between events. For the
    benchmark probes that time hand-written kernels beside the product's."""
    flush = flush or (lambda: write_flush(rt, stream))
    launch()
    rt.ck(rt.drv.cuStreamSynchronize(stream), "cuStreamSynchronize")
    exe = rt.capture(stream, launch)
    for _ in range(5):
        rt.replay(exe, stream)
    evs = [(rt.event(), rt.event()) for _ in range(reps)]
    for a, b in evs:
        flush()
        rt.record(a, stream)
        rt.replay(exe, stream)
        rt.record(b, stream)
    return float(statistics.median(rt.elapsed_ms(a, b) * 1e3 for a, b in evs))


def time_graph(compiled: CompiledGraph, warmup: int = 10, reps: int = 100, graph: bool = False,
               seed: int | None = None, flush_l2: bool = False,
               inputs: Sequence[DeviceArray] | None = None, flush: str | None = None) -> float:
    """Median microseconds per run of ``compiled`` on random device inputs.

    ``graph``: replay a CUDA graph of the launches; ``flush_l2``: overwrite a 256 MB buffer
    before each timed run, outside the timed region (as triton's ``do_bench`` does), so
    inputs come from device memory, not the L2. The product and the benchmarks time with
    both on (:func:`time_like_baselines`), so their numbers agree.
    ``flush``: how the flush writes (:data:`FLUSH_METHODS`; None: :func:`flush_method`).
    ``inputs``: device arrays to run on instead of fresh ones from ``seed`` (a caller timing
    many schedules of one graph draws them once: :func:`device_inputs` costs ~0.5 s of host
    time per 50 MB of inputs, more than the timing itself).
    """
    compiled.load()
    rt = compiled._rt
    assert rt is not None
    ins = list(inputs) if inputs is not None else device_inputs(compiled, seed)
    if [tuple(x.shape) for x in ins] != [tuple(n.shape) for n in compiled.graph.inputs]:
        raise ValueError("time_graph: the given inputs do not match the graph's input shapes")
    outs = [DeviceArray(n.shape, n.dtype, rt) for n in compiled.graph.outputs]
    in_ptrs = [x.ptr for x in ins]
    out_ptrs = [o.ptr for o in outs]
    stream = rt.stream()

    def run() -> None:
        compiled.launch(in_ptrs, out_ptrs, stream)

    if graph:
        # one eager launch first: it allocates the workspace (no allocation may happen while
        # a stream is being captured)
        run()
        rt.ck(rt.drv.cuStreamSynchronize(stream), "cuStreamSynchronize")
        exe = rt.capture(stream, run)

        def step() -> None:
            rt.replay(exe, stream)
    else:
        step = run
    for _ in range(warmup):
        step()
    rt.ck(rt.drv.cuStreamSynchronize(stream), "cuStreamSynchronize")
    evs = [(rt.event(), rt.event()) for _ in range(reps)]
    method = flush or flush_method()
    for a, b in evs:
        if flush_l2:
            write_flush(rt, stream, method)
        rt.record(a, stream)
        step()
        rt.record(b, stream)
    times = [rt.elapsed_ms(a, b) * 1000.0 for a, b in evs]
    return float(statistics.median(times))


def time_like_baselines(compiled: CompiledGraph, seed: int | None = None, reps: int = 100,
                        inputs: Sequence[DeviceArray] | None = None) -> float:
    """Median µs as the benchmarks time PyTorch: CUDA-graph replays, L2 flushed before each."""
    return time_graph(compiled, warmup=10, reps=reps, graph=True, seed=seed, flush_l2=True,
                      inputs=inputs)


@dataclass
class Candidate:
    graph: KernelGraph
    compiled: CompiledGraph
    report: ValidationReport
    us: float | None


def fastest(candidates: Sequence[CompiledGraph], reference: KernelGraph, graph: bool = True,
            seed: int | None = None) -> tuple[Candidate | None, list[Candidate]]:
    """Validate each candidate against ``reference``, time those that pass, return the best."""
    results = []
    for c in candidates:
        rep = validate(c, reference, seed=seed)
        us = time_graph(c, graph=graph, seed=seed, flush_l2=graph) if rep.ok else None
        results.append(Candidate(c.graph, c, rep, us))
    ok = [r for r in results if r.us is not None]
    best = min(ok, key=lambda r: r.us or 0.0) if ok else None
    return best, results
