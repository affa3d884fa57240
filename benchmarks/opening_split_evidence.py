"""The evidence for the tuner's opening schedule (``codegen.tuning_rules.opening_schedule``):
in the H200's tuning logs kept under ``benchmarks/results``, every pair of trials of one
μGraph whose schedules differ only in one kernel's loop split, the kernel unsplit against
split by ``ir.occupancy.loop_splits``' first split (the opening split), by the kernel's
blocks. A ratio below 1: the split ran faster.

    PYTHONPATH=. python3 benchmarks/opening_split_evidence.py

Imports the package only (no GPU). Prints a table; s45's numbers: docs/codegen.md.
"""

from __future__ import annotations

import collections
import glob
import gzip
import json
import math
import statistics
from pathlib import Path
from typing import Any

from mirage_formal.codegen import launches
from mirage_formal.ir.occupancy import loop_splits
from mirage_formal.ir.serialize import FORMAT, VERSION, ugraphs_from_json

ROOT = Path(__file__).resolve().parent / "results"
SM_COUNT = 132  # (the H200's)


def _kernels(doc: dict[str, Any], memo: dict[str, tuple[int, int]]) -> None:
    """Each kernel key of a logged μGraph -> (blocks, loop iterations), into ``memo``."""
    g = ugraphs_from_json({"format": FORMAT, "version": VERSION, "ugraphs": [doc]})[0][0]
    for la in launches(g, 128):
        memo[la.graph.key] = (math.prod(la.graph.grid), la.graph.forloop)


def comparisons() -> list[tuple[int, float]]:
    """(blocks, opening split's time / unsplit time) per comparison."""
    shapes: dict[str, tuple[int, int]] = {}
    out: list[tuple[int, float]] = []
    paths = glob.glob(str(ROOT / "*" / "c*" / "*.meas.jsonl*")) + glob.glob(str(ROOT / "*" / "*.meas.jsonl*"))
    for p in sorted(paths):
        opener: Any = gzip.open if p.endswith(".gz") else open
        with opener(p, "rt") as f:
            recs = [json.loads(line) for line in f if line.strip()]
        if not recs or "H200" not in recs[0].get("gpu", ""):
            continue
        by_graph = collections.defaultdict(list)
        for r in recs:
            if r.get("valid") and r.get("us") and "ugraph" in r:
                by_graph[r["graph"]].append(r)
        for rs in by_graph.values():
            with_split: dict[tuple[str, str, str], dict[int, float]] = {}
            for r in rs:
                for k, s in r["schedules"].items():
                    if s.get("cluster_combine"):
                        continue
                    rest = json.dumps({kk: v for kk, v in s.items() if kk != "split"}, sort_keys=True)
                    others = json.dumps({kk: v for kk, v in r["schedules"].items() if kk != k},
                                        sort_keys=True)
                    times = with_split.setdefault((k, rest, others), {})
                    sp = s.get("split", 1)
                    times[sp] = min(times.get(sp, math.inf), r["us"])
                    if k not in shapes:
                        _kernels(r["ugraph"], shapes)
            for (k, _, _), times in with_split.items():
                if k not in shapes or 1 not in times:
                    continue
                blocks, forloop = shapes[k]
                first = loop_splits(blocks, forloop, SM_COUNT)
                if first and first[0] in times:
                    out.append((blocks, times[first[0]] / times[1]))
    return out


def main() -> None:
    rows = comparisons()
    print("| kernel's blocks | comparisons | split faster | geomean split/unsplit | worst |")
    print("|---|---|---|---|---|")
    for lo, hi in [(0, SM_COUNT // 2), (SM_COUNT // 2, SM_COUNT - 1), (0, SM_COUNT - 1)]:
        sel = [r for b, r in rows if lo < b <= hi]
        if sel:
            gm = math.exp(statistics.mean(math.log(r) for r in sel))
            print(f"| ({lo}, {hi}] | {len(sel)} | {sum(r < 1 for r in sel)} | {gm:.2f} | {max(sel):.2f} |")


if __name__ == "__main__":
    main()
