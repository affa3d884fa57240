"""GPU benchmark: validate and time our kernels for every workload beside PyTorch.

One process, one GPU. For each row (workload, batch) of ../shared/BENCHMARKS.md:

- candidates: the program lowered op by op, the hand-written μGraph (rmsnorm, gqa) and every
  Mirage checkpoint μGraph for that workload and batch; each is compiled (NVRTC, cached),
  validated against the float64 program on fresh random inputs (NaN-poisoned outputs,
  max-relative error <= the fp16 tolerance), and only if it passes, timed;
- baselines: PyTorch eager, eager replayed as a CUDA graph, torch.compile (default mode)
  replayed as a CUDA graph, and SDPA (scale=1.0) replayed as a CUDA graph for gqa/mha/mqa.

Every time is the median of ``triton.testing.do_bench`` (CUDA events, L2 flushed between
runs); ours is timed as a CUDA graph of our driver-API launches captured on PyTorch's stream,
like the graphed baselines. floor = bytes of inputs + outputs / measured copy bandwidth.

Writes $OUT/gpu_results.json (every candidate), $OUT/gpu_table.md (the table with the
environment) and $OUT/failures.txt (sources of kernels that failed validation), and prints
the table last. Usage: python3 benchmarks/gpu_bench.py --out DIR [--no-compile] [--rows gqa:1,...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from mirage_formal import workloads  # noqa: E402
from mirage_formal.codegen import SIMPLE, EmitOptions, compile_graph, graph_bytes  # noqa: E402
from mirage_formal.codegen.nvrtc import nvrtc_version  # noqa: E402
from mirage_formal.codegen.runtime import runtime  # noqa: E402
from mirage_formal.codegen.validate import validate  # noqa: E402
from mirage_formal.ir.dtypes import DType  # noqa: E402
from mirage_formal.ir.graph import INPUT, KernelGraph  # noqa: E402

CKPT_FILES = {("rmsnorm", 1): ("rmsnorm_bs1.json", ["X", "W"]),
              ("gated_mlp", 1): ("gated_mlp.json", ["X", "W1", "W2"]),
              ("gqa", 1): ("gqa_bs1.json", ["Q", "K", "V"])}
ATTENTION = ("gqa", "mha", "mqa")
BATCH_FREE = ("lora", "gated_mlp")


def find_checkpoints() -> Path | None:
    for c in (ROOT / "shared" / "mirage_checkpoints", ROOT.parent / "shared" / "mirage_checkpoints"):
        if c.is_dir():
            return c
    return None


# ---------------------------------------------------------------- torch baselines

def torch_dtype(dt: DType) -> Any:
    """The torch dtype of a program's tensor type (inputs are drawn, outputs allocated in it)."""
    import torch

    return {DType.F16: torch.float16, DType.BF16: torch.bfloat16, DType.F32: torch.float32}[dt]


def torch_ops(torch: Any) -> dict[str, Any]:
    """Each kernel-level registry op as torch code (``torch`` is the module; the functions
    only touch it when called, so the table's keys can be listed without it:
    ``tests/test_benchmark_tables.py`` checks that they cover the registry)."""

    def rms_norm(x: Any, *rest: Any, eps: float = 0.0) -> Any:
        y = x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)
        return y * rest[0] if rest else y

    return {
        "matmul": lambda a, b, **k: torch.matmul(a, b),
        "add": lambda a, b, **k: a + b, "sub": lambda a, b, **k: a - b,
        "mul": lambda a, b, **k: a * b, "div": lambda a, b, **k: a / b,
        "maximum": lambda a, b, **k: torch.maximum(a, b),
        "exp": lambda a, **k: torch.exp(a), "neg": lambda a, **k: -a,
        "silu": lambda a, **k: torch.nn.functional.silu(a),
        "sigmoid": lambda a, **k: torch.sigmoid(a), "sqrt": lambda a, **k: torch.sqrt(a),
        "tanh": lambda a, **k: torch.tanh(a),
        "square": lambda a, **k: a * a, "relu": lambda a, **k: torch.relu(a),
        "rsqrt": lambda a, **k: torch.rsqrt(a),
        "gelu": lambda a, **k: torch.nn.functional.gelu(a, approximate="tanh"),
        "mul_scalar": lambda a, scalar, **k: a * scalar,
        "add_scalar": lambda a, scalar, **k: a + scalar,
        "sum": lambda a, axis, keepdims, **k: torch.sum(a, dim=axis, keepdim=keepdims),
        "mean": lambda a, axis, keepdims, **k: torch.mean(a, dim=axis, keepdim=keepdims),
        "rms_norm": rms_norm,
    }


def torch_program(prog: KernelGraph) -> Any:
    """The program as PyTorch eager code (fp16 tensors, torch's own kernels): its output, or
    a tuple of them for a program of several."""
    import torch

    table = torch_ops(torch)
    nodes = prog.nodes

    def fn(*xs: Any) -> Any:
        vals = dict(zip(prog.inputs, xs, strict=True))
        for n in nodes:
            if n.op == INPUT:
                continue
            vals[n] = table[n.op](*[vals[s] for s in n.src], **n.attr_dict)
        outs = tuple(vals[o] for o in prog.outputs)
        return outs if len(outs) > 1 else outs[0]

    return fn


def _consumers(prog: KernelGraph) -> dict[Any, list[Any]]:
    out: dict[Any, list[Any]] = {n: [] for n in prog.nodes}
    for n in prog.nodes:
        for s in n.src:
            out[s].append(n)
    return out


def _is_row_reduce(n: Any, op: str) -> bool:
    return n.op == op and n.attr("keepdims") and n.attr("axis") in (-1, len(n.src[0].shape) - 1)


def _layer_norm_match(n: Any, only: Any) -> tuple[Any, Any, Any, float] | None:
    """``n`` ends a layer norm written as the PyTorch bridge translates ``F.layer_norm``:
    ((x - mean(x)) · rsqrt(mean((x - mean(x))²) + eps)) [· gain] [+ bias], over the last axis,
    its inner values read by nothing else (``only(inner, outer)``). (x, gain, bias, eps)."""
    gain = bias = None
    if n.op == "add" and len(n.src[1].shape) == 1 and n.src[0].op == "mul" and only(n.src[0], n):
        bias, n = n.src[1], n.src[0]
    if n.op == "mul" and len(n.src[1].shape) == 1 and n.src[0].op == "mul" and only(n.src[0], n):
        gain, n = n.src[1], n.src[0]
    if len(n.src) != 2 or (n.op, n.src[1].op) not in (("mul", "rsqrt"), ("div", "sqrt")):
        return None
    c, r = n.src  # (x - mean) times rsqrt(var [+ eps]), or over sqrt(var [+ eps])
    if not (c.op == "sub" and only(r, n)):
        return None
    var, reader, eps = r.src[0], r, 0.0
    if var.op == "add_scalar" and only(var, r):
        var, reader, eps = var.src[0], var, float(var.attr("scalar"))
    if not _is_row_reduce(var, "mean"):
        return None
    sq, (x, m) = var.src[0], c.src
    if not (sq.op == "square" and sq.src[0] is c and only(sq, var) and only(var, reader)
            and _is_row_reduce(m, "mean") and m.src[0] is x and only(m, c) and only(c, sq, n)):
        return None
    return x, gain, bias, eps


def _softmax_match(n: Any, only: Any) -> Any | None:
    """``n`` is exp(s) / sum(exp(s)) over the last axis: s."""
    if n.op != "div" or n.src[0].op != "exp" or not _is_row_reduce(n.src[1], "sum"):
        return None
    e, tot = n.src
    return e.src[0] if tot.src[0] is e and only(tot, n) and only(e, n, tot) else None


def torch_idiomatic(prog: KernelGraph) -> tuple[Any, list[str]] | None:
    """The program as a PyTorch user writes it where it contains what torch has as one call:
    a layer norm (``F.layer_norm``), an rms_norm (``F.rms_norm``), a softmax over the last
    axis (``torch.softmax``: with its row maximum, the same function), and a product of such a
    softmax of (scaled) Q·Kᵀ with V (``F.scaled_dot_product_attention``, K given transposed
    as the program stores it, copied row-major inside the timed call). Returns the function
    and the calls it uses, or None when the program has none of them (then it is
    :func:`torch_program`). A baseline beside the program's op-by-op form: ViT's layer norm plus projection took 13.0 µs as ``F.layer_norm``
    and ``addmm`` and 33.8 as its nine elementwise ops and a matmul (H200, s48 c1, c5)."""
    import torch
    import torch.nn.functional as F

    table = torch_ops(torch)
    cons = _consumers(prog)
    outs = set(prog.outputs)

    def only(inner: Any, *outer: Any) -> bool:  # (inner read only by ``outer``, no output)
        return inner not in outs and all(c in outer for c in cons[inner])

    fused: dict[Any, tuple[str, list[Any], Any]] = {}
    for n in prog.nodes:
        if (ln := _layer_norm_match(n, only)) is not None:
            x, gain, bias, eps = ln
            d = x.shape[-1]
            fused[n] = ("layer_norm", [x, *(t for t in (gain, bias) if t is not None)],
                        lambda v, g=gain, b=bias, d=d, eps=eps: F.layer_norm(
                            v[0], (d,), v[1] if g is not None else None,
                            v[-1] if b is not None else None, eps))
        elif n.op == "rms_norm":
            d, eps = n.src[0].shape[-1], float(n.attr("eps") or 0.0)
            fused[n] = ("rms_norm", list(n.src), lambda v, d=d, eps=eps: F.rms_norm(
                v[0], (d,), v[1] if len(v) > 1 else None, eps))
        elif (s := _softmax_match(n, only)) is not None:
            fused[n] = ("softmax", [s], lambda v: torch.softmax(v[0], dim=-1))
    for n in prog.nodes:
        # attention: softmax((Q·Kᵀ) [· c]) · V, or its deferred form (exp(·)·V) / rowsum(exp(·))
        if n.op == "div" and n.src[0].op == "matmul" and n.src[0].src[0].op == "exp" \
                and _is_row_reduce(n.src[1], "sum") and n.src[1].src[0] is n.src[0].src[0]:
            p, vv = n, n.src[0].src[1]
            e = p.src[0].src[0]
            if not (only(e, p.src[0], p.src[1]) and only(p.src[0], p) and only(p.src[1], p)):
                continue
            s, reader, scale, n_out = e.src[0], e, 1.0, n
        elif n.op == "matmul" and n.src[0] in fused and fused[n.src[0]][0] == "softmax":
            p, vv = n.src
            # (the logits, read by the exp)
            s, reader, scale, n_out = fused[p][1][0], p.src[0], 1.0, n
        else:
            continue
        if s.op == "mul_scalar" and only(s, reader):
            s, reader, scale = s.src[0], s, float(s.attr("scalar"))
        if s.op == "matmul" and only(s, reader) and (p is n_out or only(p, n_out)) \
                and len(s.shape) >= 3 \
                and s.shape[:-2] == vv.shape[:-2] == s.src[0].shape[:-2] == s.src[1].shape[:-2]:
            # (K is stored transposed: its transposed view has a last stride other than 1, on
            # which SDPA takes its slow math path, 166.6 µs for gqa b=1 in BENCHMARKS.md; a
            # user copies it to the row-major form the flash kernels read, and that copy is
            # timed with the call)
            fused[n_out] = ("scaled_dot_product_attention", [s.src[0], s.src[1], vv],
                            lambda v, c=scale: F.scaled_dot_product_attention(
                                v[0], v[1].transpose(-2, -1).contiguous(), v[2], scale=c))
            if p is not n_out:
                del fused[p]  # (its softmax is the attention's own)
    if not fused:
        return None

    def fn(*xs: Any) -> Any:
        vals = dict(zip(prog.inputs, xs, strict=True))

        def value(n: Any) -> Any:
            if n not in vals:
                if n in fused:
                    _, ins, call = fused[n]
                    vals[n] = call([value(s) for s in ins])
                else:
                    vals[n] = table[n.op](*[value(s) for s in n.src], **n.attr_dict)
            return vals[n]

        got = tuple(value(o) for o in prog.outputs)
        return got if len(got) > 1 else got[0]

    return fn, sorted({f[0] for f in fused.values()})


def graphed(fn: Any, args: list[Any]) -> Any:
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn(*args)
    return g.replay


def bench(fn: Any) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")) * 1000.0


def copy_bandwidth() -> float:
    """Device-to-device copy bandwidth in bytes/s (read + write counted)."""
    import torch

    a = torch.empty(512 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    us = bench(lambda: b.copy_(a))
    return 2 * a.numel() / (us * 1e-6)


# ---------------------------------------------------------------- our candidates

def flash(bh: int, q: int, d: int, kv: int, splits: int, rows: int, kv_tile: int,
          qknorm: bool, threads: int = 128, prenorm: bool = False) -> KernelGraph:
    """A FlashDecoding-style μGraph template (as workloads.gqa_flashdecoding, plus optional
    QK-norm inside the first kernel, or before it as kernel-level ops with ``prenorm``): per
    key split, partial exp-sums and partial outputs, then a combine kernel."""
    from mirage_formal.ir.builder import Graph

    g = Graph()
    Q = g.input((bh, q, d), "f16", "Q")
    K = g.input((bh, d, kv), "f16", "K")
    V = g.input((bh, kv, d), "f16", "V")
    if prenorm:
        Q, V = g.rms_norm(Q), g.rms_norm(V)
    k1 = g.kernel([Q, K, V], grid=(bh, splits, q // rows), threads=threads,
                  forloop=kv // splits // kv_tile)
    qt = k1.iter(Q, imap=(0, -1, 1))
    kt = k1.iter(K, imap=(0, 2, -1), fmap=2)
    vt = k1.iter(V, imap=(0, 1, -1), fmap=1)
    if qknorm and not prenorm:
        qt = k1.rms_norm(qt)
        vt = k1.rms_norm(vt)
    e = k1.exp(k1.matmul(qt, kt))
    k1.output(k1.accum(e, fold=1), omap=(0, 2, 1))
    k1.output(k1.accum(k1.matmul(e, vt)), omap=(0, 2, 1))
    sums, parts = k1.build()
    cr = min(16, q)
    k2 = g.kernel([sums, parts], grid=(bh, q // cr, 1), threads=128, forloop=1)
    st = k2.iter(sums, imap=(0, 1, -1))
    pt = k2.iter(parts, imap=(0, 1, -1))
    k2.output(k2.div(k2.accum(pt, fold=d), k2.accum(st, fold=1)), omap=(0, 1, -1))
    (o,) = k2.build()
    g.output(o)
    return g.build()


def ntrans_fused(b: int, threads: int) -> KernelGraph:
    """ntrans as one graph-defined kernel: one block per row, everything in the block."""
    from mirage_formal.ir.builder import Graph

    prog = workloads.program("ntrans", b)
    rows, h = prog.inputs[0].shape
    g = Graph()
    H, X, A = (g.input((rows, h), "f16", n) for n in ("H", "X", "alpha"))
    k = g.kernel([H, X, A], grid=(rows, 1, 1), threads=threads, forloop=1)
    ht, xt, at = (k.iter(t, imap=(0, -1, -1)) for t in (H, X, A))
    y = k.rms_norm(k.add(xt, k.mul(at, k.add(k.rms_norm(ht), xt))))
    k.output(k.accum(y), omap=(0, -1, -1))
    (o,) = k.build()
    g.output(o)
    return g.build()


def lora_fused(col: int, k_tile: int) -> KernelGraph:
    """lora as X·A (a small lowered matmul) then one kernel for X·W + (XA)·B: the loop-invariant
    product (XA)·B goes through a *mean* accumulator, which returns it unchanged."""
    from mirage_formal.ir.builder import Graph

    prog = workloads.program("lora", 1)
    (_, kd), (_, n) = prog.inputs[0].shape, prog.inputs[1].shape
    g = Graph()
    X, W, A, B = (g.input(t.shape, "f16", t.attr("name")) for t in prog.inputs)
    XA = g.matmul(X, A)
    k = g.kernel([X, W, XA, B], grid=(n // col, 1, 1), threads=128, forloop=kd // k_tile)
    xt = k.iter(X, fmap=1)
    wt = k.iter(W, imap=(1, -1, -1), fmap=0)
    xat = k.iter(XA)
    bt = k.iter(B, imap=(1, -1, -1))
    y = k.add(k.accum(k.matmul(xt, wt)), k.accum(k.matmul(xat, bt), kind="mean"))
    k.output(y, omap=(1, -1, -1))
    (o,) = k.build()
    g.output(o)
    return g.build()


def attention_sweep(name: str, b: int) -> list[tuple[str, KernelGraph]]:
    prog = workloads.program(name, b)
    (bh, q, d), (_, _, kv) = prog.inputs[0].shape, prog.inputs[1].shape
    out = []
    for splits in (8, 16, 32):
        for kv_tile in (64, 128):
            for rows in (16, 64):
                if rows > q or kv % (splits * kv_tile) or q % rows:
                    continue
                out.append((f"flash(s{splits},kv{kv_tile},r{rows})",
                            flash(bh, q, d, kv, splits, rows, kv_tile, name == "qknorm_gqa")))
                if rows == 64:
                    out.append((f"flash(s{splits},kv{kv_tile},r{rows},t256)",
                                flash(bh, q, d, kv, splits, rows, kv_tile, name == "qknorm_gqa",
                                      threads=256)))
                if name == "qknorm_gqa":
                    out.append((f"flash(s{splits},kv{kv_tile},r{rows},prenorm)",
                                flash(bh, q, d, kv, splits, rows, kv_tile, True, prenorm=True)))
    return out


def candidates(name: str, b: int) -> list[tuple[str, KernelGraph]]:
    from mirage_formal.ir.mirage import load_mirage

    out = [("program", workloads.program(name, b))]
    if name in (*ATTENTION, "qknorm_gqa"):
        out += attention_sweep(name, b)
    if name == "ntrans":
        out += [(f"fused(t{t})", ntrans_fused(b, t)) for t in (128, 256, 512)]
    if name == "lora":
        out += [(f"fused(c{c},k{kt})", lora_fused(c, kt)) for c in (16, 32, 64) for kt in (64, 128)]
    if name in workloads.HANDWRITTEN:
        out.append(("handwritten", workloads.handwritten(name, b)))
    ck = find_checkpoints()
    if ck is not None and (name, b) in CKPT_FILES:
        fname, names = CKPT_FILES[name, b]
        for i, g in enumerate(load_mirage(ck / fname, names)):
            out.append((f"mirage#{i}", g))
    return out


def time_ours(cg: Any, torch_inputs: list[Any]) -> tuple[float, float]:
    """(plain launches, CUDA-graph replay) microseconds, on PyTorch's current stream."""
    import torch

    outs = [torch.empty(n.shape, dtype=torch_dtype(n.dtype), device="cuda") for n in cg.graph.outputs]
    in_ptrs = [t.data_ptr() for t in torch_inputs]
    out_ptrs = [t.data_ptr() for t in outs]

    def run() -> None:
        cg.launch(in_ptrs, out_ptrs, torch.cuda.current_stream().cuda_stream)

    plain = bench(run)
    replay = graphed(lambda *a: run(), [])
    return plain, bench(replay)


def _variants(name: str, b: int) -> list[tuple[str, KernelGraph, EmitOptions]]:
    return [(label + "/" + vname, g, opts) for label, g in candidates(name, b)
            for vname, opts in (("fast", EmitOptions()), ("simple", SIMPLE))
            if vname == "fast" or label in ("program", "handwritten")]


def _precompile(job: tuple[list[tuple[str, int]], int, int, str | None]) -> int:
    """Compile this worker's share of every candidate (NVRTC only, no CUDA context)."""
    rows, part, parts, cache = job
    n = k = 0
    for name, b in rows:
        for _, g, opts in _variants(name, b):
            k += 1
            if k % parts == part:
                try:
                    compile_graph(g, arch="sm_90", load=False, cache=cache, opts=opts)
                    n += 1
                except Exception as e:  # reported again, with the source, by the main loop
                    print(f"precompile: {type(e).__name__}: {e}", flush=True)
    return n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile baselines")
    ap.add_argument("--rows", default="", help="comma list name:b (default: all)")
    ap.add_argument("--max-checkpoints", type=int, default=1000)
    ap.add_argument("--cache", default=None, help="cubin cache directory")
    ap.add_argument("--jobs", type=int, default=0, help="compile in N processes first (sm_90)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [(n, b) for b in (1, 8) for n in workloads.PROGRAMS if not (b == 8 and n in BATCH_FREE)]
    if args.rows:
        want = {(r.split(":")[0], int(r.split(":")[1])) for r in args.rows.split(",")}
        rows = [r for r in rows if r in want]
    if args.jobs > 1:  # before any CUDA call: the workers are forked
        import multiprocessing as mp

        t0 = time.time()
        with mp.get_context("fork").Pool(args.jobs) as pool:
            n = sum(pool.map(_precompile, [(rows, i, args.jobs, args.cache) for i in range(args.jobs)]))
        print(f"precompiled {n} candidates in {time.time() - t0:.0f} s", flush=True)
    import torch
    import triton

    rt = runtime()
    env = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": rt.name, "arch": rt.arch, "driver_cuda": rt.driver_version,
        "torch": torch.__version__, "triton": triton.__version__, "nvrtc": nvrtc_version(),
        "python": platform.python_version(),
    }
    try:
        import subprocess
        env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        env["driver"] = "?"
    bw = copy_bandwidth()
    env["copy_bandwidth_TBps"] = round(bw / 1e12, 3)
    print("env:", json.dumps(env), flush=True)

    results: list[dict[str, Any]] = []
    table: list[dict[str, Any]] = []
    failures: list[str] = []
    for name, b in rows:
        t0 = time.time()
        prog = workloads.program(name, b)
        gen = torch.Generator(device="cuda").manual_seed(1234 + b)
        tin = [(torch.rand(n.shape, generator=gen, device="cuda") - 0.5).half() for n in prog.inputs]
        # ours
        best: tuple[float, str] | None = None
        n_ok = n_all = 0
        ck_count = 0
        variants = _variants(name, b)
        for label, g, opts in variants:
            if label.startswith("mirage#"):
                ck_count += 1
                if ck_count > 2 * args.max_checkpoints:
                    continue
            n_all += 1
            rec: dict[str, Any] = {"workload": name, "b": b, "candidate": label, "kernels": len(g.kernels)}
            try:
                cg = compile_graph(g, cache=args.cache, opts=opts)
                main = label.split("/")[0] in ("program", "handwritten")
                rep = validate(cg, prog, trials=2 if main else 1)
                rec.update(ok=rep.ok, err=max(rep.errors), seeds=rep.seeds, summary=cg.summary())
                if rep.ok:
                    n_ok += 1
                if rep.ok and (main or label.endswith("/fast")):
                    plain, replay = time_ours(cg, tin)
                    rec.update(us_plain=plain, us_graph=replay)
                    if best is None or replay < best[0]:  # fastest validated candidate
                        best = (replay, label)
                elif not rep.ok:
                    failures.append(f"==== {name} b={b} {label}: {rep}\n{cg.summary()}\n{cg.source}")
            except Exception as e:  # a codegen bug: recorded, never dropped
                rec.update(ok=False, error=f"{type(e).__name__}: {e}")
                failures.append(f"==== {name} b={b} {label}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
            results.append(rec)
            print(json.dumps({k: v for k, v in rec.items() if k != "summary"}), flush=True)
        # baselines
        fn = torch_program(prog)
        base: dict[str, float | None] = {"eager": None, "eager+graph": None, "compile+graph": None,
                                         "sdpa+graph": None}
        try:
            base["eager"] = bench(lambda: fn(*tin))  # noqa: B023 - called at once
            base["eager+graph"] = bench(graphed(fn, tin))
            if not args.no_compile:
                cfn = torch.compile(fn)
                base["compile+graph"] = bench(graphed(cfn, tin))
            if name in ATTENTION:
                import torch.nn.functional as F

                q, k, v = tin
                kt = k.transpose(-1, -2).contiguous()
                base["sdpa+graph"] = bench(graphed(
                    lambda q, kt, v: F.scaled_dot_product_attention(q, kt, v, scale=1.0), [q, kt, v]))
        except Exception as e:
            print(f"baseline failure {name} b={b}: {type(e).__name__}: {e}", flush=True)
        vals = [v for v in base.values() if v is not None]
        best_base = min(vals) if vals else None
        floor = graph_bytes(prog) / bw * 1e6
        row = {"workload": name, "b": b, "ours": best[0] if best else None,
               "ours_from": best[1] if best else "-", "validated": f"{n_ok}/{n_all}",
               **base, "best_baseline": best_base, "floor": floor,
               "ratio": (best_base / best[0]) if (best and best_base) else None,
               "seconds": round(time.time() - t0, 1)}
        table.append(row)
        print("ROW", json.dumps(row), flush=True)
        torch.cuda.empty_cache()

    def f(x: Any, nd: int = 1) -> str:
        return "–" if x is None else f"{x:.{nd}f}"

    lines = ["| workload | b | ours (µs) | from | validated | eager | eager+graph | compile+graph | "
             "SDPA+graph | best baseline | best/ours | floor | ours/floor |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(
            f"| {r['workload']} | {r['b'] if r['workload'] not in BATCH_FREE else '–'} | {f(r['ours'])} | "
            f"{r['ours_from']} | {r['validated']} | {f(r['eager'])} | {f(r['eager+graph'])} | "
            f"{f(r['compile+graph'])} | {f(r['sdpa+graph'])} | {f(r['best_baseline'])} | "
            f"{f(r['ratio'], 2)} | {f(r['floor'])} | "
            f"{f(r['ours'] / r['floor'] if r['ours'] else None)} |")
    ratios = [r["ratio"] for r in table if r["ratio"]]
    gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else None
    text = "\n".join([
        f"GPU benchmark — {env['date']}", "",
        f"- GPU: {env['gpu']} ({env['arch']}), driver {env['driver']} (CUDA {env['driver_cuda']}), "
        f"copy bandwidth {env['copy_bandwidth_TBps']} TB/s",
        f"- torch {env['torch']}, triton {env['triton']}, NVRTC {env['nvrtc']}, Python {env['python']}",
        "- times: median µs of triton do_bench; ours and '+graph' baselines replayed as CUDA graphs",
        f"- geometric mean of best-baseline/ours: {f(gm, 3)}", "", *lines, ""])
    (out / "gpu_table.md").write_text(text)
    (out / "gpu_results.json").write_text(json.dumps({"env": env, "rows": table, "candidates": results},
                                                     indent=1, default=str))
    (out / "failures.txt").write_text("\n\n".join(failures) if failures else "no failures\n")
    print(text)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "8")
    sys.exit(main())
