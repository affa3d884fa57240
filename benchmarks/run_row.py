"""Launch a table row's winner a few times, for a profiler (device only).

Usage: PYTHONPATH=. python3 benchmarks/run_row.py WORKLOAD:B [FIELD=VALUE,...] [--table FILE]

The row's best μGraph (``benchmarks/results/gpu_optimize_latest.json`` or ``--table``) is
compiled under the schedules its tuner chose, with ``FIELD=VALUE`` set in every kernel's
schedule, and run twice after a warm-up with the L2 flushed. Under Nsight Compute:
``ncu --clock-control none --section SpeedOfLight ... -k regex:mf_ -c 1 python3
benchmarks/run_row.py mqa:8`` profiles its first kernel (the eighteenth session's c1).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from retime_winners import winner  # noqa: E402

from mirage_formal.codegen import compile_graph  # noqa: E402
from mirage_formal.codegen.timing import device_inputs, time_graph  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("row", help="WORKLOAD:B")
    ap.add_argument("set", nargs="?", default="", help="FIELD=VALUE,... for every kernel")
    ap.add_argument("--table", default=str(ROOT / "benchmarks/results/gpu_optimize_latest.json"))
    a = ap.parse_args()
    w, b = a.row.rsplit(":", 1)
    row = next(r for r in json.loads(Path(a.table).read_text())
               if r["workload"] == w and r["b"] == int(b))
    over = {k: ast.literal_eval(v) for k, v in (kv.split("=", 1) for kv in a.set.split(",") if kv)}
    graph, sched = winner(row)
    cg = compile_graph(graph, schedules={k: replace(s, **over) for k, s in sched.items()})
    print(cg.summary())
    xs = device_inputs(cg, seed=3)
    print("us", time_graph(cg, warmup=1, reps=2, graph=False, flush_l2=True, inputs=xs))


if __name__ == "__main__":
    main()
