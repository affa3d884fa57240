"""When could the search have handed over to the GPU stage? Read from gpu_optimize rows.

Each row of ``benchmarks/gpu_optimize.py`` (since the forty-third session) records
``found_by_estimate``: for the 16 best-estimated accepted μGraphs, when the search found each
(seconds from its start) and what the GPU stage measured for it. For every row this prints
when the search last changed its top k (the candidates the GPU stage tunes: ``--gpu-top``),
how long the search ran, and, for a patience rule "stop once the search has run ``factor``
times as long as it took to last change its top k", when that rule would have stopped it and
whether the row's winner (the best measured) was found by then.

    python3 benchmarks/handover_rule.py FILE... [--top 8] [--factor 2 3 4]

FILE is a gpu_optimize.json ({"rows": [...]}) or a merged table (a list of rows). Rows
without ``found_by_estimate`` (older runs) are listed as such. Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def rows_of(path: Path) -> list[dict[str, Any]] | None:
    """The rows of a gpu_optimize.json or a merged table; None for any other JSON (another
    benchmark's output passed by a glob)."""
    doc = json.loads(path.read_text())
    rows = doc.get("rows") if isinstance(doc, dict) else doc
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "workload" in r for r in rows):
        return None
    return rows


def top_changed_at(found: list[dict[str, Any]], top: int) -> float | None:
    """When the search found the last of the ``top`` best-estimated μGraphs (None: none of
    them was found by this search)."""
    times = [f["found_at_s"] for f in found[:top] if f.get("found_at_s") is not None]
    return max(times) if times else None


def winner_found_at(found: list[dict[str, Any]]) -> float | None:
    """When the search found the best measured of the recorded μGraphs."""
    timed = [f for f in found if f.get("measured_us") is not None]
    if not timed:
        return None
    return min(timed, key=lambda f: f["measured_us"]).get("found_at_s")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--factor", type=float, nargs="+", default=[2.0, 3.0, 4.0])
    a = ap.parse_args()
    head = ["row", "search s", f"top {a.top} last changed s", "winner found s",
            *[f"x{f:g}: stop s (winner kept)" for f in a.factor]]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for path in a.files:
        rows = rows_of(path)
        if rows is None:
            print(f"| {path} | (not gpu_optimize rows: skipped) |")
            continue
        for r in rows:
            name = f"{r['workload']} b={r['b']}"
            found = r.get("found_by_estimate")
            search_s = (r.get("seconds") or {}).get("search")
            if not found:
                print(f"| {name} | {search_s} | (no found_by_estimate: an older run) |")
                continue
            changed, won = top_changed_at(found, a.top), winner_found_at(found)
            cells = [name, f"{search_s}", f"{changed}", f"{won}"]
            for f in a.factor:
                if changed is None or search_s is None:
                    cells.append("-")
                    continue
                stop = min(search_s, f * changed)
                kept = won is None or won <= stop
                cells.append(f"{stop:.1f} ({'yes' if kept else 'NO'})")
            print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
