"""Launch table winners a few times and nothing else, for a profiler (device only).

Usage: ncu --clock-control none --metrics ... python3 benchmarks/launch_winner.py
    --rows W:B,... [--set FIELD=VALUE,...] [--runs 2] [--table FILE]

Each row's best μGraph is compiled under its recorded schedules (``--set``: fields changed in
every kernel's schedule that takes them, as in ``retime_winners.py``) and run ``--runs`` times
on fresh random inputs, synchronizing after each run, so the profiler sees only these
kernels. No validation here (``retime_winners.py`` validates the same compiled kernels before
it times them); this is a probe, not a measurement the table uses.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from retime_winners import overridden, parse_fields, winner  # noqa: E402

from mirage_formal.codegen import compile_graph  # noqa: E402
from mirage_formal.codegen.runtime import runtime  # noqa: E402
from mirage_formal.codegen.timing import device_inputs  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", required=True, help="W:B,...")
    ap.add_argument("--set", default="", help="FIELD=VALUE,... set in every kernel's schedule")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--table", default=str(ROOT / "benchmarks/results/gpu_optimize_latest.json"))
    a = ap.parse_args()
    over = parse_fields(a.set)
    rows = {f"{r['workload']}:{r['b']}": r for r in json.loads(Path(a.table).read_text())}
    for name in a.rows.split(","):
        graph, sched = winner(rows[name])
        cg = compile_graph(graph, schedules=overridden(graph, sched, over) if over else sched)
        xs = device_inputs(cg, seed=3)
        for _ in range(a.runs):
            cg(*xs)
            runtime().sync()
        print(f"{name}: {len(cg.kernels)} kernel(s) launched {a.runs} times: "
              + "; ".join(f"{k.name} grid {list(k.grid)} x {k.threads}" for k in cg.kernels), flush=True)


if __name__ == "__main__":
    main()
