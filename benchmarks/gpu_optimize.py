"""The whole product on a GPU: ``mf.superoptimize(program, gpu=True)`` for benchmark programs.

For each row (workload:batch):

1. phase 1 (no CUDA in this process yet, so the search may fork workers): ``superoptimize``
   with ``gpu=False`` and a checkpoint file — the search, the Z3 oracle, the field verifier and
   the float64 re-check, exactly as ``mirage-formal optimize`` runs them;
2. phase 2: ``superoptimize(..., gpu=True)`` on the same checkpoint: the search resumes with
   every unit done (no new search work), the accepted μGraphs are verified again, and the
   ``--gpu-top`` best by the cost model are autotuned (every schedule compiled with NVRTC,
   validated on the device against the float64 program, timed like the baselines: CUDA graph,
   L2 flushed); ``result.kernel`` is the fastest validated one;
3. ``result.kernel`` is called on PyTorch fp16 tensors in place and compared with the program
   evaluated by PyTorch in float64, then timed as a CUDA graph beside PyTorch eager (+graph)
   and torch.compile (+graph), all with ``triton.testing.do_bench`` in this one process.

Rows are WORKLOAD:B or outside:NAME:B (a program of benchmarks/search_outside.py).

Usage (device): PYTHONPATH=.:/tmp/site python3 benchmarks/gpu_optimize.py --rows rmsnorm:1,lora:1
    --workers 14 --budget 120 --out DIR [--phase 1|2 --ckpt-dir D].  Writes DIR/gpu_optimize.json
    and .md (rows: workload, b, validated, ours_graph_us, best_baseline_us,
    best_baseline_over_ours, ...) and DIR/measurements.jsonl (every autotuner trial, with the
    μGraph and its estimate: cost-model data); prints the table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from mirage_formal import superoptimize, workloads  # noqa: E402
from mirage_formal.search import WORKLOAD_PRESETS  # noqa: E402


def torch_check_and_time(res: Any, prog: Any) -> dict[str, Any]:
    import torch
    from gpu_bench import bench, graphed, time_ours, torch_program

    gen = torch.Generator(device="cuda").manual_seed(7)
    # uniform in (-0.5, 0.5), as the validation and gpu_bench.py draw: the attention programs
    # have no max subtraction, so (-1, 1) overflows fp16 in exp(QK) (gqa: e^13 > 65504)
    xs = [(torch.rand(n.shape, device="cuda", generator=gen) - 0.5).half() for n in prog.inputs]
    fn = torch_program(prog)
    want = fn(*[x.double() for x in xs])
    o = torch.empty(prog.outputs[0].shape, dtype=torch.float16, device="cuda")
    res.kernel(*xs, out=[o], stream=torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    got = o.double()
    rel = float((got - want).abs().max() / want.abs().max())
    _, ours = time_ours(res.kernel, xs)
    eager_g = bench(graphed(fn, xs))
    compiled = torch.compile(fn)
    compiled(*xs)
    compile_g = bench(graphed(compiled, xs))
    return {"kernel_vs_torch_f64_rel_err": rel, "ours_graph_us": ours, "eager_graph_us": eager_g,
            "compile_graph_us": compile_g, "best_baseline_over_ours": min(eager_g, compile_g) / ours}


ALL_ROWS = ("gqa:1,mha:1,mqa:1,qknorm_gqa:1,rmsnorm:1,lora:1,gated_mlp:1,ntrans:1,"
            "gqa:8,mha:8,mqa:8,qknorm_gqa:8,rmsnorm:8,ntrans:8")


def load_program(name: str, b: int) -> Any:
    """A benchmark workload, or ``outside:NAME``: a program of benchmarks/search_outside.py."""
    if name.startswith("outside:"):
        from search_outside import PROGRAMS

        return PROGRAMS[name.split(":", 1)[1]](b)
    return workloads.program(name, b)


def preset_for(name: str, how: str) -> str | None:
    """``auto``: superoptimize's own default (None); ``workload``: the shipped preset."""
    return WORKLOAD_PRESETS.get(name) if how == "workload" else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default=ALL_ROWS)
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--budget", type=float, default=120.0)
    ap.add_argument("--gpu-top", type=int, default=4, help="candidates autotuned per row")
    ap.add_argument("--preset", choices=("auto", "workload"), default="auto")
    ap.add_argument("--phase", choices=("1", "2", "both"), default="both",
                    help="1: search only (checkpoints in --ckpt-dir); 2: GPU stage from them")
    ap.add_argument("--ckpt-dir", default=None, help="checkpoints (default: --out)")
    ap.add_argument("--out", default="gpu_optimize_out")
    ap.add_argument("--save-dir", default=None,
                    help="where each row's ugraphs.json and report.md go (default: --out)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ckpt = Path(args.ckpt_dir) if args.ckpt_dir else out
    ckpt.mkdir(parents=True, exist_ok=True)
    rows = [(r.rsplit(":", 1)[0], int(r.rsplit(":", 1)[1])) for r in args.rows.split(",")]
    phase1: dict[tuple[str, int], Any] = {}
    for name, b in rows:                       # phase 1: CPU only, forking workers
        if args.phase == "2":
            break
        prog = load_program(name, b)
        t = time.monotonic()
        try:
            r = superoptimize(prog, preset_for(name, args.preset), budget_s=args.budget,
                              workers=args.workers, checkpoint=ckpt / f"{name.replace(':', '_')}_b{b}.ckpt.json",
                              gpu=False, compile_best=False)
        except Exception as e:                 # keep the other rows
            print(f"phase 1 {name} b={b}: {type(e).__name__}: {e}", flush=True)
            continue
        phase1[(name, b)] = (r, time.monotonic() - t)
        print(f"phase 1 {name} b={b}: {len(r.accepted)} accepted in {phase1[(name, b)][1]:.1f} s "
              f"({r.search.summary()['units']} units, stopped: {r.search.stopped})", flush=True)
        (ckpt / f"{name.replace(':', '_')}_b{b}.phase1.json").write_text(json.dumps(
            {"search_s": round(phase1[(name, b)][1], 1), "accepted": len(r.accepted),
             "complete": r.search.complete}))
    if args.phase == "1":
        return 0
    results = []
    from mirage_formal.codegen.runtime import runtime
    rt = runtime()
    for name, b in rows:                       # phase 2: the GPU stage of superoptimize
        prog = load_program(name, b)
        p1 = ckpt / f"{name.replace(':', '_')}_b{b}.phase1.json"
        info = json.loads(p1.read_text()) if p1.is_file() else {}
        row: dict[str, Any] = {"workload": name, "b": b, "search_s": info.get("search_s"),
                               "accepted": info.get("accepted"),
                               "search_complete": info.get("complete")}
        try:
            t = time.monotonic()
            res = superoptimize(prog, preset_for(name, args.preset), budget_s=args.budget,
                                workers=1, checkpoint=ckpt / f"{name.replace(':', '_')}_b{b}.ckpt.json", gpu=True,
                                gpu_top=args.gpu_top)
            row["gpu_stage_s"] = round(time.monotonic() - t, 1)
            timed = [a for a in res.accepted if a.measured_us is not None]
            row["validated"] = f"{len(timed)}/{min(args.gpu_top, len(res.accepted))}"
            row["schedule"] = res.accepted[0].schedule if res.accepted else None
            row["failed_validation"] = [n for n in res.codegen_notes if "FAILED" in n or "compile error" in n]
            row["measured_us_by_superoptimize"] = [round(a.measured_us, 2) for a in timed]
            row["best_kernels"] = len(res.accepted[0].graph.kernels) if res.accepted else None
            row["best_estimated_us"] = round(res.accepted[0].cost.seconds * 1e6, 2) if res.accepted else None
            if res.kernel is not None:
                row.update(torch_check_and_time(res, prog))
                row["best_ugraph"] = str(res.accepted[0].graph)
            res.save(Path(args.save_dir or out) / f"{name.replace(':', '_')}_b{b}")
        except Exception as e:                 # keep the other rows; report this one
            row["error"] = f"{type(e).__name__}: {e}"
            traceback.print_exc()
        results.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "best_ugraph"}), flush=True)
    import torch
    import triton

    env = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="minutes"),
           "gpu": rt.name, "arch": rt.arch, "driver": rt.driver_version, "torch": torch.__version__,
           "triton": triton.__version__, "python": platform.python_version(),
           "workers": args.workers, "budget_s": args.budget}
    for r in results:
        if "ours_graph_us" in r:
            r["best_baseline_us"] = min(r["eager_graph_us"], r["compile_graph_us"])
        r["validated_ok"] = "ours_graph_us" in r and r.get("kernel_vs_torch_f64_rel_err", 1) < 2e-2
    env["command"] = " ".join(sys.argv)
    (out / "gpu_optimize.json").write_text(json.dumps({"env": env, "rows": results}, indent=1) + "\n")
    tuning_log = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mirage-formal" / "tuning" / "measurements.jsonl"
    if tuning_log.is_file():
        (out / "measurements.jsonl").write_bytes(tuning_log.read_bytes())
    lines = [f"# gpu_optimize — {env['date']}", "", f"- {json.dumps(env)}", "",
             "| workload | b | search s | accepted | validated (top 8) | best kernels | ours µs | "
             "eager+graph µs | compile+graph µs | best baseline/ours | kernel vs torch f64 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "ours_graph_us" not in r:
            lines.append(f"| {r['workload']} | {r['b']} | {r['search_s']} | {r['accepted']} | "
                         f"{r.get('validated', '-')} | - | - | - | - | - | {r.get('error', 'no kernel')} |")
            continue
        lines.append(f"| {r['workload']} | {r['b']} | {r['search_s']} | {r['accepted']} | {r['validated']} | "
                     f"{r['best_kernels']} | {r['ours_graph_us']:.1f} | {r['eager_graph_us']:.1f} | "
                     f"{r['compile_graph_us']:.1f} | {r['best_baseline_over_ours']:.2f} | "
                     f"{r['kernel_vs_torch_f64_rel_err']:.1e} |")
    (out / "gpu_optimize.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
