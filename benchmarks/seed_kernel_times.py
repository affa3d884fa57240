"""Seed ``benchmarks/data/kernel_times.jsonl`` from the per-candidate GPU measurements already in
the repository (``benchmarks/results/gpu_*.json``, written by ``benchmarks/gpu_bench.py``).

Those files name each candidate by its label in ``gpu_bench.candidates`` ("program",
"handwritten", "flash(s16,kv64,r16)", "fused(t256)", ...) and the codegen schedule ("/fast" =
the default ``EmitOptions``, "/simple" = ``SIMPLE``); this script rebuilds each labelled μGraph
with the same code, so every record carries the μGraph itself. Candidates that cannot be
rebuilt here (``mirage#i``: they need Mirage's checkpoint files) are skipped and counted. Only
candidates that passed validation (``ok``) are kept; the time is the CUDA-graph replay median.

    PYTHONPATH=. python3 benchmarks/seed_kernel_times.py benchmarks/results/gpu_2026-11-23.json

Imports the package and ``gpu_bench`` (which imports codegen; no GPU is needed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_bench
from kernel_times import DATA, Record, append, load

from mirage_formal.search.cost import estimate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="gpu_bench result JSON files")
    ap.add_argument("--out", default=str(DATA))
    args = ap.parse_args()
    have = {(r.workload, r.batch, r.graph.key, r.method) for r in load(args.out)} if Path(args.out).exists() else set()
    new: list[Record] = []
    skipped = 0
    for f in args.results:
        doc = json.loads(Path(f).read_text())
        env = doc["env"]
        cache: dict[tuple[str, int], dict[str, object]] = {}
        for c in doc["candidates"]:
            if not c.get("ok") or c.get("us_graph") is None:
                continue
            name, b = c["workload"], int(c["b"])
            if (name, b) not in cache:
                cache[name, b] = dict(gpu_bench.candidates(name, b))
            label, _, sched = c["candidate"].rpartition("/")
            g = cache[name, b].get(label)
            if g is None:
                skipped += 1
                continue
            method = (f"gpu_bench.py ({Path(f).name}): triton do_bench median, L2 flushed, CUDA-graph "
                      f"replay; codegen schedule={sched}")
            key = (name, b, g.key, method)  # type: ignore[attr-defined]
            if key in have:
                continue
            have.add(key)
            new.append(Record(name, b, g, float(c["us_graph"]),  # type: ignore[arg-type]
                              estimate(g).seconds * 1e6, env["gpu"], method,  # type: ignore[arg-type]
                              str(env["date"])))
    append(new, args.out)
    print(f"appended {len(new)} records to {args.out}; skipped {skipped} candidates that cannot be rebuilt here")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
