"""GPU benchmark: a Llama-style decoder layer under torch.compile(backend="mirage_formal").

One process, one GPU, fp16, decode shapes (examples/llama_decoder.py), batch 1 and 8. For
each batch it times, with ``triton.testing.do_bench`` (median, L2 flushed) on a CUDA graph of
one layer call:

- eager PyTorch;
- torch.compile (default backend, inductor);
- ours: ``mf.compile`` (the "mirage_formal" backend: regions superoptimized with --budget
  seconds each, validated on the GPU, the rest left to torch).

It records each variant's agreement with the layer evaluated in float64 (max |out - ref| /
max |ref| per output), every region (its program, whether it runs as a kernel or with torch
and why, the kernels, the validation report, the search's seconds) and, with the region cache
warm, the time a *second process* spends before its first call returns (measured from the
parent around the whole child process, and inside the child from ``mf.compile`` to the
first result).

Writes --out/torch_decoder.json and --out/torch_decoder.md (date, GPU, driver, versions, the
exact command) after every step, so a run cut short keeps what it measured.

    PYTHONPATH=. python3 benchmarks/torch_decoder_gpu.py --out benchmarks/results/torch_decoder \\
        --batch 1 8 --budget 10
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

import torch  # noqa: E402
from llama_decoder import TINY, DecoderLayer, LayerShape, decode_inputs  # noqa: E402

import mirage_formal as mf  # noqa: E402

#: fp16 on the GPU; float32 for --device cpu (a smoke run: CPU matmuls lack fp16 speed)
DTYPE = {"cuda": torch.float16, "cpu": torch.float32}
SHAPES = {
    "llama7b": LayerShape(),
    "small": LayerShape(hidden=1024, heads=8, head_dim=128, ffn=2816, cache_len=512),
    "tiny": TINY,
}


def build(
    shape: LayerShape, batch: int, device: str, dtype: torch.dtype
) -> tuple[Any, tuple[Any, ...]]:
    torch.manual_seed(0)
    layer = DecoderLayer(shape).to(device, dtype).eval()
    return layer, decode_inputs(shape, batch, dtype, device)


def rel_errors(outs: Any, refs: Any) -> list[float]:
    return [
        float((o.double() - r).abs().max() / r.abs().max()) for o, r in zip(outs, refs, strict=True)
    ]


def graphed(fn: Any, args: tuple[Any, ...]) -> tuple[Any, Any]:
    """Capture one call of ``fn`` into a CUDA graph (after warm-up on a side stream)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.no_grad():
        out = fn(*args)
    return g, out


def cpu_median_us(fn: Any, args: tuple[Any, ...], reps: int = 20) -> float:
    """--device cpu (a smoke run of this script): median wall time of plain calls."""
    ts = []
    with torch.no_grad():
        for _ in range(reps):
            t = time.perf_counter()
            fn(*args)
            ts.append(time.perf_counter() - t)
    return 1e6 * sorted(ts)[len(ts) // 2]


def time_variant(name: str, fn: Any, args: tuple[Any, ...], refs: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"variant": name}
    try:
        with torch.no_grad():
            outs = fn(*args)
        if args[0].is_cuda:
            torch.cuda.synchronize()
        row["rel_error_vs_float64"] = rel_errors(outs, refs)
        if not args[0].is_cuda:
            row["us_cpu_calls"] = cpu_median_us(fn, args)
            return row
        from triton.testing import do_bench

        g, _ = graphed(fn, args)
        row["us_graph"] = 1e3 * float(do_bench(g.replay, return_mode="median"))
    except Exception as e:  # a failing variant is recorded, the others still run
        row["error"] = f"{type(e).__name__}: {e}"
        row["traceback"] = traceback.format_exc()[-4000:]
    return row


def region_rows(fast: Any) -> list[dict[str, Any]]:
    rows = []
    for r in fast.regions:
        rows.append(
            {
                "region": r.name,
                "torch_calls": r.ops,
                "runs_on": r.runs_on,
                "reason": r.reason,
                "ugraph_from": r.source,
                "seconds": {k: round(v, 3) for k, v in r.seconds.items()},
                "program_ops": [n.op for n in r.program.nodes if n.op != "input"]
                if r.program
                else None,
                "ugraph_kernels": len(r.ugraph.kernels) if r.ugraph is not None else None,
                "kernels": r.kernels,
                "schedule": r.schedule,
                "validation": r.validation,
                "kernel_us": r.kernel_us,
                "torch_us": r.torch_us,
                "ugraph": str(r.ugraph) if r.ugraph is not None else None,
                "search": r.search,
            }
        )
    return rows


def child_first_call(a: argparse.Namespace) -> None:
    """Second process: compile with the warm cache, time until the first result."""
    t0 = time.perf_counter()
    layer, args = build(SHAPES[a.shape], a.child_batch, a.device, DTYPE[a.device])
    fast = mf.compile(
        layer, budget_s=a.budget, cache_dir=a.cache, max_region_ops=a.max_region_ops, warn=False
    )
    t1 = time.perf_counter()
    out = fast(*args)
    if a.device == "cuda":
        torch.cuda.synchronize()
    t2 = time.perf_counter()
    del out
    print(
        json.dumps(
            {
                "build_layer_s": t1 - t0,
                "compile_to_first_result_s": t2 - t1,
                "cache": fast.backend.cache.stats,
                "sources": [r.source for r in fast.regions],
                "runs_on": [r.runs_on for r in fast.regions],
            }
        )
    )


def environment(cmd: str) -> dict[str, Any]:
    env: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": cmd,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "mirage_formal": mf.__version__,
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        env["cuda_torch"] = torch.version.cuda
    try:
        from mirage_formal.codegen.nvrtc import nvrtc_version
        from mirage_formal.codegen.runtime import runtime

        rt = runtime()
        env |= {"driver": rt.driver_version, "arch": rt.arch, "nvrtc": str(nvrtc_version())}
    except Exception as e:
        env["driver"] = f"unavailable ({e})"
    return env


def markdown(doc: dict[str, Any]) -> str:
    e = doc["environment"]
    lines = [
        '# Llama-style decoder layer: backend="mirage_formal" vs torch',
        "",
        f"- date {e['date']}; GPU {e.get('gpu')}; driver {e.get('driver')}; arch {e.get('arch')}",
        f"- torch {e['torch']} (CUDA {e.get('cuda_torch')}), triton {e.get('triton')}, "
        f"NVRTC {e.get('nvrtc')}, mirage-formal {e['mirage_formal']}, Python {e['python']}",
        f"- command: `{e['command']}`",
        f"- layer {doc['shape']}, {doc['dtype']}, decode (one token per sequence); search budget "
        f"{doc['budget_s']} s per region, at most {doc['max_region_ops']} registry ops per region",
        "- times: median µs of triton do_bench (L2 flushed) replaying a CUDA graph of one layer call"
        " (--device cpu: median of plain calls, a smoke run only)",
        "",
        "| batch | variant | µs / layer | rel. error vs float64 (out, k, v) |",
        "|---|---|---|---|",
    ]
    for b in doc["batches"]:
        for r in b["variants"]:
            us = (
                f"{r['us_graph']:.1f}"
                if "us_graph" in r
                else f"{r['us_cpu_calls']:.1f} (CPU calls, no graph)"
                if "us_cpu_calls" in r
                else f"failed: {r.get('error', '')[:80]}"
            )
            errs = ", ".join(f"{x:.1e}" for x in r.get("rel_error_vs_float64", []))
            lines.append(f"| {b['batch']} | {r['variant']} | {us} | {errs} |")
    for b in doc["batches"]:
        lines += [
            "",
            f"## Regions at batch {b['batch']} (compile {b.get('compile_s', 0):.1f} s)",
            "",
            "| region | torch calls | program ops | μGraph from | kernels | kernel µs | torch µs "
            "| runs on | why torch |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in b.get("regions", []):
            ops = " ".join(r["program_ops"] or [])
            k_us, t_us = (f"{r[k]:.1f}" if r.get(k) is not None else "-"
                          for k in ("kernel_us", "torch_us"))
            lines.append(
                f"| {r['region']} | {r['torch_calls']} | {ops} | {r['ugraph_from']} | "
                f"{r['ugraph_kernels']} | {k_us} | {t_us} | {r['runs_on']} | {r['reason'][:120]} |"
            )
        for r in b.get("regions", []):
            if r["kernels"]:
                lines += [
                    "",
                    f"{r['region']} kernels:",
                    "```",
                    r["kernels"],
                    "```",
                    f"validation: {r['validation']}",
                ]
        if b.get("boundaries"):
            lines += ["", "Calls left to torch: " + "; ".join(b["boundaries"])]
    if "second_process" in doc:
        sp = doc["second_process"]
        lines += [
            "",
            "## Second process, cache warm",
            "",
            f"- wall time of the whole child process until its first result: {sp.get('process_wall_s', 0):.2f} s "
            "(Python start, imports, layer build, compile, first call)",
            f"- inside it, mf.compile to the first result: {sp.get('compile_to_first_result_s', float('nan')):.2f} s",
            f"- cache: {sp.get('cache')}; regions from {sp.get('sources')}; run on {sp.get('runs_on')}",
        ]
        if "error" in sp:
            lines.append(f"- error: {sp['error']}")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=False)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--budget", type=float, default=10.0, help="search seconds per region")
    ap.add_argument("--max-region-ops", type=int, default=6)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="llama7b")
    ap.add_argument(
        "--cache", type=Path, default=None, help="region cache (default: OUT/region_cache)"
    )
    ap.add_argument(
        "--device",
        choices=["cuda", "cpu"],
        default="cuda",
        help="cpu: a smoke run of the script's paths (no CUDA graphs, no do_bench)",
    )
    ap.add_argument("--child-batch", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child_batch is not None:
        child_first_call(a)
        return
    if a.out is None:
        ap.error("--out is required")
    a.out.mkdir(parents=True, exist_ok=True)
    a.cache = a.cache or a.out / "region_cache"
    cmd = "PYTHONPATH=. python3 " + " ".join([str(Path(sys.argv[0])), *sys.argv[1:]])
    shape = SHAPES[a.shape]
    doc: dict[str, Any] = {
        "environment": environment(cmd),
        "shape": shape.__dict__,
        "budget_s": a.budget,
        "max_region_ops": a.max_region_ops,
        "dtype": str(DTYPE[a.device]).removeprefix("torch."),
        "batches": [],
    }

    def save() -> None:
        (a.out / "torch_decoder.json").write_text(json.dumps(doc, indent=1) + "\n")
        (a.out / "torch_decoder.md").write_text(markdown(doc))

    for batch in a.batch:
        layer, args = build(shape, batch, a.device, DTYPE[a.device])
        with torch.no_grad():
            ref_layer = copy.deepcopy(layer).double()
            refs = ref_layer(*(t.double() for t in args))
        del ref_layer
        entry: dict[str, Any] = {"batch": batch, "variants": []}
        doc["batches"].append(entry)
        entry["variants"].append(time_variant("eager", layer, args, refs))
        save()
        torch._dynamo.reset()
        entry["variants"].append(
            time_variant(
                "torch.compile (inductor)", torch.compile(layer, dynamic=False), args, refs
            )
        )
        save()
        torch._dynamo.reset()
        t = time.perf_counter()
        fast = mf.compile(
            layer, budget_s=a.budget, cache_dir=a.cache, max_region_ops=a.max_region_ops
        )
        try:
            with torch.no_grad():
                fast(*args)  # compiles: partition, search, validation
            if a.device == "cuda":
                torch.cuda.synchronize()
        except Exception as e:
            entry["compile_error"] = f"{type(e).__name__}: {e}"
        entry["compile_s"] = time.perf_counter() - t
        entry["regions"] = region_rows(fast)
        entry["boundaries"] = [f"{b.op} ({b.why})" for b in fast.backend.boundaries]
        save()
        entry["variants"].append(time_variant('backend="mirage_formal"', fast, args, refs))
        save()
        del fast, layer
        torch._dynamo.reset()
        if a.device == "cuda":
            torch.cuda.empty_cache()

    t = time.perf_counter()
    child = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child-batch",
            str(a.batch[0]),
            "--shape",
            a.shape,
            "--device",
            a.device,
            "--budget",
            str(a.budget),
            "--max-region-ops",
            str(a.max_region_ops),
            "--cache",
            str(a.cache),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    sp: dict[str, Any] = {"batch": a.batch[0], "process_wall_s": time.perf_counter() - t}
    try:
        sp |= json.loads(child.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        sp["error"] = f"exit {child.returncode}: {child.stderr[-2000:]}"
    doc["second_process"] = sp
    save()
    print(markdown(doc))


if __name__ == "__main__":
    main()
