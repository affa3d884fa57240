"""Tune μGraphs given as text files on the GPU, side by side with the table's winner (device only).

Usage: PYTHONPATH=. python3 benchmarks/tune_ugraph.py W:B FILE [FILE ...] [--runs 3]
    [--table FILE] [--out FILE.json]

Each FILE (the text form, ``ir.text``) must compute workload W at batch B: it is checked
against the program by the autotuner's validation (float64 program, fresh random inputs), tuned
exactly as superoptimize's GPU stage tunes a candidate (first round, then the second round from
the winner's schedules), and timed the way the product times. The table's winner of the same
row is re-timed under its recorded schedules in the same process, and both are timed again in
``--runs`` interleaved rounds (medians), so the comparison does not depend on the GPU's state
at one moment. It answers "would this μGraph win if the search produced it?", not what the
product measures (that is ``gpu_optimize.py``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_optimize import load_program, parse_row  # noqa: E402
from retime_winners import winner  # noqa: E402

from mirage_formal.codegen import compile_graph  # noqa: E402
from mirage_formal.codegen.autotune import tune  # noqa: E402
from mirage_formal.codegen.timing import device_inputs, time_like_baselines  # noqa: E402
from mirage_formal.codegen.validate import validate  # noqa: E402
from mirage_formal.ir.text import parse_text  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("row", help="W:B, the workload and batch the files compute")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--table", default=str(ROOT / "benchmarks/results/gpu_optimize_latest.json"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    name, b = parse_row(a.row)
    program = load_program(name, b)
    compiled: dict[str, Any] = {}
    results: dict[str, dict[str, Any]] = {}
    table_row = next((r for r in json.loads(Path(a.table).read_text())
                      if f"{r['workload']}:{r['b']}" == a.row), None)
    if table_row is not None:
        graph, sched = winner(table_row)
        cg = compile_graph(graph, schedules=sched)
        rep = validate(cg, trials=2, seed=7)
        results["table"] = {"schedule": table_row.get("schedule"), "validated": rep.ok,
                            "table_us": table_row.get("ours_graph_us")}
        if rep.ok:
            compiled["table"] = cg
    shared: dict[Any, Any] = {}
    for f in a.files:
        graph = parse_text(Path(f).read_text())
        first = tune(graph, program, seed=0, refine=False, shared=shared)
        if first is None:
            results[f] = {"validated": False}
            print(f"{f}: no schedule validates", flush=True)
            continue
        second = tune(graph, program, seed=0, refine=True, start=first.schedules, shared=shared)
        best = min((t for t in (first, second) if t is not None), key=lambda t: t.us)
        results[f] = {"validated": True, "first_us": first.us, "tuned_us": best.us,
                      "schedule": best.describe(), "trials": len(first.trials) + len(
                          second.trials if second else [])}
        compiled[f] = best.compiled
        print(f"{f}: tuned {best.us:.2f} us ({results[f]['trials']} trials) {best.describe()}",
              flush=True)
    inputs = {k: device_inputs(cg, seed=3) for k, cg in compiled.items()}
    rounds: dict[str, list[float]] = {k: [] for k in compiled}
    for _ in range(a.runs):  # interleaved: each round times every graph once
        for k, cg in compiled.items():
            rounds[k].append(time_like_baselines(cg, reps=100, inputs=inputs[k]))
    print(f"\n| {a.row} | median us | rounds |\n|---|---|---|")
    for k, ts in rounds.items():
        results[k]["median_us"] = statistics.median(ts)
        results[k]["rounds_us"] = ts
        print(f"| {Path(k).name} | {statistics.median(ts):.2f} | {', '.join(f'{t:.2f}' for t in ts)} |")
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
