"""When does the search find its best μGraphs? One program, superoptimize's search with
default options, the best accepted μGraphs listed with their estimate and the second they
were found at (CPU only: no GPU stage).

Usage: PYTHONPATH=. python3 benchmarks/search_found_at.py WORKLOAD B BUDGET_S [WORKERS]
Prints the coverage, the six best by the cost model with their found-at times, and the best
μGraph.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mirage_formal import superoptimize, workloads  # noqa: E402


def main() -> None:
    name, b, budget = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    workers = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    t = time.monotonic()
    res = superoptimize(workloads.program(name, b), budget_s=budget, workers=workers)
    s = res.search.summary()
    print(f"{name} b={b}: {time.monotonic() - t:.1f} s, units {s.get('units')}, "
          f"accepted {len(res.accepted)}, complete {res.search.complete}")
    for a in res.accepted[:6]:
        print(f"  {a.cost.seconds * 1e6:8.2f} us estimated, {len(a.graph.kernels)} kernels, "
              f"found at {a.found_at_s:.1f} s")
    if res.accepted:
        print(res.accepted[0].graph)


if __name__ == "__main__":
    main()
