"""Per-kernel GPU durations of a table row's winner beside torch's compiled baselines.

For each row (``WORKLOAD:B`` or ``outside:NAME:B``) of a gpu_optimize table (default the H200's,
``results/gpu_optimize_h200.json``): the row's best μGraph under its tuned schedules, and the
program as torch.compile runs it (the idiomatic form of ``gpu_bench.torch_idiomatic`` where the
program has one, and the op-by-op form), each called REPS times after a 256 MB fill that
flushes the L2, under ``torch.profiler`` (CUPTI). Prints every kernel's median duration, grid,
block, registers and shared memory; writes ``$OUT/kernel_breakdown.json``.

Durations are the kernels' own: our dependent kernels start early (programmatic dependent
launch) and wait for their predecessor inside, so their durations overlap and do not add up to
the graph's time (that is ``gpu_optimize.py``'s). Found the 2-3x gap of ViT's products to
cuBLAS's warpgroup kernels (s50 c2, then as ``.prof/kprof.py``).

Usage (device, repository root, z3/galois pack on PYTHONPATH):
    python3 benchmarks/kernel_breakdown.py outside:vit_ln_qkv:1 rmsnorm:8 [--table PATH]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

REPS = 20
TABLE = Path(__file__).resolve().parent / "results" / "gpu_optimize_h200.json"


def kernel_rows(trace: Path, reps: int) -> list[dict[str, Any]]:
    """The kernels of one call (the fill's left out), each with its median over ``reps`` calls,
    from a chrome trace of ``reps`` calls."""
    events = [e for e in json.loads(trace.read_text())["traceEvents"]
              if e.get("cat") == "kernel" and "FillFunctor" not in e["name"]]
    events.sort(key=lambda e: e["ts"])
    per_call = len(events) // reps
    rows = []
    for i in range(per_call):
        same = events[i::per_call]
        args = same[0].get("args", {})
        rows.append({"name": same[0]["name"][:120], "us": statistics.median(e["dur"] for e in same),
                     "grid": args.get("grid"), "block": args.get("block"),
                     "regs": args.get("registers per thread"), "smem": args.get("shared memory")})
    return rows


def profile_calls(fn: Callable[[], Any], reps: int = REPS) -> list[dict[str, Any]]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace))
        return kernel_rows(trace, reps)


def _launch(cg: Any, ins: list[int], outs: list[int]) -> None:
    import torch

    cg.launch(ins, outs, torch.cuda.current_stream().cuda_stream)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="+")
    ap.add_argument("--table", default=str(TABLE))
    args = ap.parse_args()

    import torch
    from gpu_bench import torch_dtype, torch_idiomatic, torch_program
    from gpu_optimize import load_program, parse_row
    from profile_saved import parse_schedules

    from mirage_formal.codegen import compile_graph, launches
    from mirage_formal.ir.text import parse_text

    table = {(r["workload"], r["b"]): r for r in json.loads(Path(args.table).read_text())}
    out: dict[str, list[dict[str, Any]]] = {}
    for spec in args.rows:
        name, b = parse_row(spec)
        prog = load_program(name, b)
        gen = torch.Generator(device="cuda").manual_seed(7)
        xs = [(torch.rand(n.shape, device="cuda", generator=gen) - 0.5).to(torch_dtype(n.dtype))
              for n in prog.inputs]
        calls: dict[str, Callable[[], Any]] = {}
        if (row := table.get((name, b))) is not None:
            g = parse_text(row["best_ugraph"])
            keys = [la.graph.key for la in launches(g, 128)]
            cg = compile_graph(g, schedules=parse_schedules(row.get("schedule"), keys))
            outs = [torch.empty(n.shape, dtype=torch_dtype(n.dtype), device="cuda") for n in g.outputs]
            ins, res = [t.data_ptr() for t in xs], [t.data_ptr() for t in outs]
            calls["ours"] = functools.partial(_launch, cg, ins, res)
        idiom = torch_idiomatic(prog)
        if idiom is not None:
            calls["torch idiomatic compiled"] = functools.partial(torch.compile(idiom[0]), *xs)
        calls["torch compiled"] = functools.partial(torch.compile(torch_program(prog)), *xs)
        for label, fn in calls.items():
            kernels = profile_calls(fn)
            out[f"{spec} {label}"] = kernels
            print(f"## {spec} {label}: {len(kernels)} kernels", flush=True)
            for k in kernels:
                print(f"   {k['us']:8.2f} us grid={k['grid']} block={k['block']} regs={k['regs']} "
                      f"smem={k['smem']} {k['name'][:70]}", flush=True)
    Path(os.environ.get("OUT", "."), "kernel_breakdown.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
