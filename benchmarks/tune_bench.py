"""Autotuner benchmark: opening schedule (the default, or a small grid's wave-filling split) vs tuned schedule for known μGraphs, on one GPU.

For each row (workload:batch), the candidates are the program lowered op by op, the
hand-written μGraph (rmsnorm, gqa), the first Mirage checkpoint μGraphs and the best μGraphs
of the recorded CPU search (benchmarks/results/search_workloads_ugraphs, b=1). Each is tuned
by ``mirage_formal.codegen.autotune.tune`` (every schedule validated, timed as CUDA-graph
replays with the L2 flushed); the tuned winner is then timed again with triton's do_bench on
PyTorch's stream (the benchmarks' method) to check that both timings agree, beside PyTorch
eager+graph (and torch.compile+graph with --compile).

Usage (device): PYTHONPATH=/tmp/site:. python3 benchmarks/tune_bench.py --out DIR [--rows ...]
Writes DIR/tune_bench.json and DIR/tune_bench.md; prints the table last.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from mirage_formal import workloads  # noqa: E402
from mirage_formal.codegen.autotune import TuningCache, tune  # noqa: E402
from mirage_formal.ir.graph import KernelGraph  # noqa: E402
from mirage_formal.ir.serialize import load_ugraphs  # noqa: E402

ALL_ROWS = ("gqa:1,mha:1,mqa:1,qknorm_gqa:1,rmsnorm:1,lora:1,gated_mlp:1,ntrans:1,"
            "gqa:8,mha:8,mqa:8,qknorm_gqa:8,rmsnorm:8,ntrans:8")


def searched(name: str, b: int, top: int) -> list[tuple[str, KernelGraph]]:
    p = ROOT / "benchmarks" / "results" / "search_workloads_ugraphs" / name / "ugraphs.json"
    if b != 1 or not p.is_file():
        return []
    graphs = load_ugraphs(p)[:top]
    return [(f"searched#{i}", g) for i, g in enumerate(graphs)]


def candidates(name: str, b: int, mirage: int, top: int, skip: int = 0) -> list[tuple[str, KernelGraph]]:
    from gpu_bench import CKPT_FILES, find_checkpoints

    from mirage_formal.ir.mirage import load_mirage

    out = [("program", workloads.program(name, b))]
    if name in workloads.HANDWRITTEN:
        out.append(("handwritten", workloads.handwritten(name, b)))
    ck = find_checkpoints()
    if ck is not None and (name, b) in CKPT_FILES and mirage:
        fname, names = CKPT_FILES[name, b]
        for i, g in enumerate(load_mirage(ck / fname, names)[:mirage]):
            if i >= skip:
                out.append((f"mirage#{i}", g))
    return out + searched(name, b, top)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default=ALL_ROWS)
    ap.add_argument("--out", default="tune_bench_out")
    ap.add_argument("--mirage", type=int, default=2, help="Mirage checkpoint μGraphs per row")
    ap.add_argument("--top", type=int, default=3, help="searched μGraphs per row (b=1)")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile+graph")
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--max-per-kernel", type=int, default=19, help="schedules tried per kernel")
    ap.add_argument("--mirage-skip", type=int, default=0,
                    help="leave out each row's first N Mirage μGraphs (to share them over calls)")
    ap.add_argument("--only-mirage", action="store_true",
                    help="only Mirage's published μGraphs (with --mirage 99: all of them)")
    args = ap.parse_args()
    import torch
    import triton
    from gpu_bench import bench, graphed, time_ours, torch_program

    from mirage_formal.codegen.runtime import runtime

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rt = runtime()
    cache = TuningCache(out / "tuning")
    rows: list[dict[str, Any]] = []
    for spec in args.rows.split(","):
        name, b = spec.split(":")[0], int(spec.split(":")[1])
        prog = workloads.program(name, b)
        gen = torch.Generator(device="cuda").manual_seed(7)
        xs = [(torch.rand(n.shape, device="cuda", generator=gen) - 0.5).half() for n in prog.inputs]
        fn = torch_program(prog)
        base = {"eager_graph_us": bench(graphed(fn, xs))}
        if args.compile:
            c = torch.compile(fn)
            c(*xs)
            base["compile_graph_us"] = bench(graphed(c, xs))
        for label, g in candidates(name, b, args.mirage, args.top, args.mirage_skip):
            if args.only_mirage and not label.startswith("mirage"):
                continue
            row: dict[str, Any] = {"workload": name, "b": b, "candidate": label,
                                   "kernels": len(g.kernels), **base}
            t = time.monotonic()
            try:
                tuned = tune(g, prog, jobs=args.jobs, cache=cache, max_per_kernel=args.max_per_kernel,
                             context={"workload": name, "batch": b, "candidate": label})
                row["tune_s"] = round(time.monotonic() - t, 1)
                if tuned is None:
                    row["error"] = "no schedule validated"
                else:
                    row["default_us"] = tuned.default_us
                    row["tuned_us"] = tuned.us
                    row["schedule"] = tuned.describe()
                    row["trials"] = len(tuned.trials)
                    row["failed"] = [t.error[:200] for t in tuned.trials if not t.valid]
                    row["do_bench_graph_us"] = time_ours(tuned.compiled, xs)[1]
            except Exception as e:  # keep the other rows
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                traceback.print_exc()
            rows.append(row)
            print(json.dumps(row), flush=True)
            with open(out / "tune_bench.rows.jsonl", "a") as fh:  # survives a call's time limit
                fh.write(json.dumps(row) + "\n")
    env = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="minutes"),
           "gpu": rt.name, "arch": rt.arch, "driver": rt.driver_version, "torch": torch.__version__,
           "triton": triton.__version__, "python": platform.python_version(),
           "command": " ".join(sys.argv)}
    (out / "tune_bench.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1) + "\n")
    lines = [f"# tune_bench — {env['date']}", "", f"- {json.dumps(env)}", "",
             "| workload | b | candidate | kernels | opening µs | tuned µs | do_bench µs | eager+graph µs "
             "| compile+graph µs | schedule |", "|---|---|---|---|---|---|---|---|---|---|"]

    def f(x: Any) -> str:
        return "-" if x is None else f"{x:.1f}"

    for r in rows:
        lines.append(f"| {r['workload']} | {r['b']} | {r['candidate']} | {r['kernels']} | "
                     f"{f(r.get('default_us'))} | {f(r.get('tuned_us'))} | "
                     f"{f(r.get('do_bench_graph_us'))} | {f(r.get('eager_graph_us'))} | "
                     f"{f(r.get('compile_graph_us'))} | {r.get('schedule', r.get('error', ''))} |")
    ok = [r for r in rows if r.get("tuned_us") is not None]
    # the same method on both sides: do_bench of a CUDA-graph replay, L2 flushed
    beat = [r for r in ok if r.get("do_bench_graph_us", r["tuned_us"]) <= r["eager_graph_us"]]
    lines += ["", f"validated {len(ok)}/{len(rows)}; at least as fast as PyTorch eager+graph: "
              f"{len(beat)}/{len(ok)}"]
    (out / "tune_bench.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
