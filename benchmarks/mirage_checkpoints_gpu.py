"""Mirage's published μGraphs through our codegen and autotuner, timed beside PyTorch.

For each checkpoint file of ../shared/mirage_checkpoints (rmsnorm b=1, gated_mlp, gqa b=1:
the μGraphs Mirage's own search accepted, imported by ``ir.mirage.load_mirage``):

1. PyTorch baselines of the program, once per program: eager replayed as a CUDA graph and
   torch.compile (default mode) replayed as a CUDA graph;
2. every μGraph, in round-robin order over the files so each program is covered if the time
   limit cuts the run short: ``codegen.autotune.tune`` (every schedule the tuner proposes
   compiled by NVRTC, validated against the float64 program on fresh random inputs, timed as
   a CUDA graph with the L2 flushed; then its second round), then the winner is run on
   PyTorch fp16 tensors against the program in float64 and timed with triton's ``do_bench``
   as a CUDA graph exactly like the baselines.

Writes OUT/mirage_checkpoints_gpu.json (every μGraph: tuned µs, default-schedule µs,
schedule, error vs float64, ratio to eager+graph and to torch.compile+graph; ``candidate``
names it as benchmarks/import_tuned_times.py reads it) and OUT/measurements.jsonl (every
autotuner trial), and prints a table last. Usage (device): PYTHONPATH=/tmp/site:. python3 benchmarks/mirage_checkpoints_gpu.py
--out DIR [--limit-s 400]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_bench import CKPT_FILES, bench, find_checkpoints, graphed, time_ours, torch_program  # noqa: E402

from mirage_formal import workloads  # noqa: E402


def baselines(prog: Any) -> tuple[list[Any], Any, dict[str, float]]:
    """Random fp16 inputs (the validation's range), the float64 answer, baseline times."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(11)
    xs = [((torch.rand(n.shape, device="cuda", generator=gen) - 0.5) * 0.5).half()
          for n in prog.inputs]
    fn = torch_program(prog)
    want = fn(*[x.double() for x in xs])
    eager_g = bench(graphed(fn, xs))
    compiled = torch.compile(fn)
    compiled(*xs)
    compile_g = bench(graphed(compiled, xs))
    return xs, want, {"eager_graph_us": eager_g, "compile_graph_us": compile_g}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit-s", type=float, default=400.0,
                    help="no new μGraph is started after this many seconds")
    args = ap.parse_args()
    import torch
    import triton

    from mirage_formal.codegen.autotune import TuningCache, tune
    from mirage_formal.codegen.nvrtc import nvrtc_version
    from mirage_formal.codegen.runtime import runtime
    from mirage_formal.ir.mirage import load_mirage

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ck = find_checkpoints()
    if ck is None:
        print("no shared/mirage_checkpoints beside the repository")
        return 1
    rt = runtime()
    t0 = time.monotonic()
    per_file: list[tuple[str, int, Any, list[Any]]] = []
    base: dict[tuple[str, int], tuple[list[Any], Any, dict[str, float]]] = {}
    for (name, b), (fname, names) in CKPT_FILES.items():
        prog = workloads.program(name, b)
        per_file.append((name, b, prog, load_mirage(ck / fname, names)))
        base[name, b] = baselines(prog)
    order = [(name, b, prog, i, gs[i]) for i in range(max(len(gs) for *_, gs in per_file))
             for name, b, prog, gs in per_file if i < len(gs)]
    rows: list[dict[str, Any]] = []
    for name, b, prog, i, g in order:
        if time.monotonic() - t0 > args.limit_s:
            break
        xs, want, bl = base[name, b]
        row: dict[str, Any] = {"workload": name, "b": b, "index": i, "candidate": f"mirage#{i}",
                               "kernels": len(g.kernels), **bl}
        try:
            tuned = tune(g, prog)
            if tuned is None:
                row["error"] = "no schedule validated"
            else:
                o = torch.empty(prog.outputs[0].shape, dtype=torch.float16, device="cuda")
                tuned.compiled(*xs, out=[o], stream=torch.cuda.current_stream().cuda_stream)
                torch.cuda.synchronize()
                rel = float((o.double() - want).abs().max() / want.abs().max())
                _, ours = time_ours(tuned.compiled, xs)
                row.update({"tuned_us": tuned.us, "default_us": tuned.default_us,
                            "schedule": tuned.describe(), "trials": len(tuned.trials),
                            "rel_err_vs_f64": rel, "ours_graph_us": ours,
                            "eager_graph_over_ours": bl["eager_graph_us"] / ours,
                            "compile_graph_over_ours": bl["compile_graph_us"] / ours})
        except Exception as e:  # keep the other μGraphs; report this one
            row["error"] = f"{type(e).__name__}: {e}"[:400]
            traceback.print_exc()
        rows.append(row)
        print(json.dumps(row), flush=True)
        (out / "mirage_checkpoints_gpu.partial.json").write_text(json.dumps(rows, indent=1))
    env = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="minutes"),
           "gpu": rt.name, "arch": rt.arch, "driver": rt.driver_version,
           "nvrtc": nvrtc_version(), "torch": torch.__version__, "triton": triton.__version__,
           "python": platform.python_version(), "seconds": round(time.monotonic() - t0, 1),
           "total_ugraphs": len(order)}
    (out / "mirage_checkpoints_gpu.json").write_text(json.dumps({"env": env, "rows": rows},
                                                                indent=1) + "\n")
    print(json.dumps(env))
    log = TuningCache().dir / "measurements.jsonl"  # every trial: cost-model data
    if log.is_file():
        shutil.copy(log, out / "measurements.jsonl")
    print("| workload | b | # | kernels | ours µs | default µs | eager+graph | compile+graph "
          "| eager/ours | rel err |")
    for r in rows:
        if "ours_graph_us" in r:
            print(f"| {r['workload']} | {r['b']} | {r['index']} | {r['kernels']} | "
                  f"{r['ours_graph_us']:.1f} | {r['default_us'] or 0:.1f} | "
                  f"{r['eager_graph_us']:.1f} | {r['compile_graph_us']:.1f} | "
                  f"{r['eager_graph_over_ours']:.2f} | {r['rel_err_vs_f64']:.1e} |")
        else:
            print(f"| {r['workload']} | {r['b']} | {r['index']} | {r['kernels']} | "
                  f"{r.get('error', '')[:80]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
