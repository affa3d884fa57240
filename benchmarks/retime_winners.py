"""Re-time the end-to-end table's winners, as they are, under the current emitter (device only).

Usage: PYTHONPATH=. python3 benchmarks/retime_winners.py [--rows W:B,...] [--table FILE]
    [--reps 100] [--set FIELD=VALUE,...] [--out FILE.json]

For each row of ``benchmarks/results/gpu_optimize_latest.json`` (or ``--table``): the row's
best μGraph is compiled with the schedules its tuner chose (the row's ``schedule``), validated
against the float64 program on fresh random inputs, and timed the way the product times
(``time_like_baselines``: CUDA-graph replays, L2 flushed, median), and again without the
flush (``warm``: what the flush costs it). The μGraph and schedule stay
fixed, so two runs of this script on two versions of the code (``PYTHONPATH`` pointing at each)
measure what an emitter change alone does (``--cluster``: each winner whose schedule splits its
loop is also timed with the split combined through a thread-block cluster); the product's numbers still come from
``gpu_optimize.py`` (search and tuner re-run). Prints one line per row; ``--out`` keeps them.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from profile_saved import parse_schedules  # noqa: E402

from mirage_formal.codegen import compile_graph, launches  # noqa: E402
from mirage_formal.codegen.schedule import CLUSTER_MAX, Schedule, stream_k_ok  # noqa: E402
from mirage_formal.codegen.timing import device_inputs, time_graph, time_like_baselines  # noqa: E402
from mirage_formal.codegen.validate import validate  # noqa: E402
from mirage_formal.ir.graph import KernelGraph  # noqa: E402
from mirage_formal.ir.text import parse_text  # noqa: E402


def winner(row: dict[str, Any]) -> tuple[KernelGraph, dict[str, Schedule]]:
    """A table row's best μGraph and the schedule of each of its kernels (the row's)."""
    graph = parse_text(row["best_ugraph"])
    return graph, parse_schedules(row.get("schedule"), [la.graph.key for la in launches(graph, 128)])


def parse_fields(text: str) -> dict[str, Any]:
    """``FIELD=VALUE,...`` (a ``--set`` argument) as schedule fields, values as Python
    literals; a name that is no schedule field exits with the fields there are."""
    fields = {k: ast.literal_eval(v) for k, v in (kv.split("=", 1) for kv in text.split(",") if kv)}
    known = set(Schedule.__dataclass_fields__)
    bad = sorted(set(fields) - known)
    if bad:
        raise SystemExit(f"--set: no schedule field {', '.join(bad)} (fields: {', '.join(sorted(known))})")
    return fields


def overridden(graph: KernelGraph, sched: dict[str, Schedule],
               over: dict[str, Any]) -> dict[str, Schedule]:
    """``sched`` with the fields ``over`` set in every kernel's schedule (``--set``;
    stream-K only in kernels with a loop and accumulators for it)."""
    blocks = {la.graph.key: la.graph for la in launches(graph, 128)}
    return {k: s if over.get("stream_k") and not stream_k_ok(blocks[k], over["stream_k"])
            else replace(s, **over) for k, s in sched.items()}


def retime(row: dict[str, Any], reps: int, cluster: bool = False,
           over: dict[str, Any] | None = None) -> dict[str, Any]:
    graph, sched = winner(row)
    if over:
        sched = overridden(graph, sched, over)
    if cluster:  # every split of at most CLUSTER_MAX combined through its cluster instead
        sched = {k: replace(s, cluster_combine=1 < s.split <= CLUSTER_MAX) for k, s in sched.items()}
    t0 = time.perf_counter()
    cg = compile_graph(graph, schedules=sched)
    compile_s = time.perf_counter() - t0
    rep = validate(cg, trials=2, seed=7, low=-row.get("input_range", 0.5),
                   high=row.get("input_range", 0.5))
    xs = device_inputs(cg, seed=3)
    us = time_like_baselines(cg, reps=reps, inputs=xs) if rep.ok else None
    # the same CUDA-graph replays without the flush: inputs and workspace left in L2 by the
    # previous run (what the flush costs this μGraph)
    warm = time_graph(cg, warmup=10, reps=reps, graph=True, flush_l2=False, inputs=xs) if rep.ok else None
    return {"row": f"{row['workload']}:{row['b']}", "schedule": row.get("schedule"),
            "validated": rep.ok, "max_rel_err": max(rep.errors, default=0.0), "us": us, "warm_us": warm,
            "table_us": row.get("ours_graph_us"), "compile_s": round(compile_s, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", default=str(ROOT / "benchmarks/results/gpu_optimize_latest.json"))
    ap.add_argument("--rows", default="", help="W:B,... (default: every row of the table)")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--out", default="")
    ap.add_argument("--set", default="", help="FIELD=VALUE,... set in every kernel's schedule "
                    "(an A/B of one schedule field on the winners)")
    ap.add_argument("--cluster", action="store_true",
                    help="also time each split winner with its combine through a cluster")
    a = ap.parse_args()
    rows = json.loads(Path(a.table).read_text())
    want = set(a.rows.split(",")) if a.rows else None
    over = parse_fields(a.set)
    results = []
    for row in rows:
        name = f"{row['workload']}:{row['b']}"
        if want is not None and name not in want:
            continue
        if not row.get("best_ugraph"):  # (a row whose run kept no μGraph: nothing to re-time)
            print(f"{name:34s} no best_ugraph in the table: skipped", flush=True)
            continue
        r = retime(row, a.reps, over=over)
        results.append(r)
        if a.cluster and "split=" in (row.get("schedule") or ""):
            c = retime(row, a.reps, cluster=True)
            r["cluster_us"], r["cluster_validated"] = c["us"], c["validated"]
            print(f"{name:34s} cluster: valid={c['validated']!s:5s} us={c['us'] or 0:.2f}", flush=True)
        us = f"{r['us']:.2f}" if r["us"] is not None else "-"
        warm = f"{r['warm_us']:.2f}" if r["warm_us"] is not None else "-"
        print(f"{name:34s} valid={r['validated']!s:5s} us={us:>8s} warm={warm:>8s} "
              f"table={r['table_us']:.2f}", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
