"""Merge gpu_optimize.py results into benchmarks/results/gpu_optimize_latest.json.

Each row of each FILE (a gpu_optimize.json: {"env": ..., "rows": [...]}) replaces the row of
the same (workload, b) in the latest table, carrying its run's environment as ``run_env`` (and
``commit`` when given), so every row says when, where and by which command it was measured.
Prints the table and the geometric mean of best-baseline/ours over the 14 benchmark rows.
A table holds the rows of one GPU: a file measured on another GPU than the table's rows is
refused (the H100's table is ``gpu_optimize_latest.json``, the H200's ``gpu_optimize_h200.json``).

Usage: python3 benchmarks/merge_gpu_rows.py FILE... [--commit SHA] [--latest PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

LATEST = Path(__file__).resolve().parent / "results" / "gpu_optimize_latest.json"
#: the 14 rows of BENCHMARKS.md: 8 programs at b=1, six at b=8
BENCHMARK_ROWS = {(w, 1) for w in ("gqa", "mha", "mqa", "qknorm_gqa", "rmsnorm", "lora",
                                   "gated_mlp", "ntrans")} | \
    {(w, 8) for w in ("gqa", "mha", "mqa", "qknorm_gqa", "rmsnorm", "ntrans")}


class MixedGPUs(ValueError):
    """Rows measured on another GPU than the table's: a table compares rows of one GPU only."""


def merge(latest: list[dict[str, Any]], files: list[Path], commit: str | None) -> list[dict[str, Any]]:
    by = {(r["workload"], r["b"]): r for r in latest}
    gpus = {(r.get("run_env") or {}).get("gpu") for r in latest} - {None}
    for f in files:
        doc = json.loads(f.read_text())
        gpu = doc["env"].get("gpu")
        if gpus and gpu not in gpus:
            raise MixedGPUs(f"{f}: measured on {gpu!r}, the table's rows on {sorted(gpus)}; merge it "
                            "into that GPU's table (--latest, e.g. gpu_optimize_h200.json)")
        if gpu is not None:  # (a run without a GPU name neither sets nor breaks the table's)
            gpus.add(gpu)
        for r in doc["rows"]:
            row = dict(r, run_env=doc["env"])
            if commit:
                row["commit"] = commit
            by[r["workload"], r["b"]] = row
    return sorted(by.values(), key=lambda r: (r["workload"].startswith("outside"), r["b"], r["workload"]))


def geomean(rows: list[dict[str, Any]]) -> tuple[float, int]:
    xs = [r["best_baseline_over_ours"] for r in rows
          if (r["workload"], r["b"]) in BENCHMARK_ROWS and r.get("best_baseline_over_ours")]
    return (math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")), len(xs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--commit", default=None)
    ap.add_argument("--latest", type=Path, default=LATEST)
    args = ap.parse_args()
    try:
        rows = merge(json.loads(args.latest.read_text()), args.files, args.commit)
    except MixedGPUs as e:
        raise SystemExit(f"merge_gpu_rows: {e}") from None
    fd, tmp = tempfile.mkstemp(dir=args.latest.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(rows, indent=1) + "\n")
    os.replace(tmp, args.latest)
    for r in rows:
        print(f"{r['workload']:28s} b={r['b']}  ours {r['ours_graph_us']:7.1f} us  best baseline "
              f"{r['best_baseline_us']:7.1f} us  ratio {r['best_baseline_over_ours']:.2f}  "
              f"({r['run_env']['date']})")
    g, n = geomean(rows)
    print(f"geometric mean over {n} benchmark rows: {g:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
