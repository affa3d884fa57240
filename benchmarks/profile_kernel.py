"""Run one μGraph's kernels a few times under a chosen schedule, for Nsight Compute.

Usage (device): ncu --section SpeedOfLight ... python3 benchmarks/profile_kernel.py WORKLOAD:B
    CANDIDATE [threads=256,split=4,...]  — CANDIDATE: program | handwritten | searched#N |
    fusedCOLxK (rmsnorm's one-kernel μGraph with those tiles).
Prints each kernel's grid, threads, shared memory and schedule.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from tune_bench import candidates  # noqa: E402

from mirage_formal.codegen import Schedule, compile_graph, launches  # noqa: E402
from mirage_formal.codegen.timing import time_graph  # noqa: E402


def main() -> None:
    name, b = sys.argv[1].split(":")
    label = sys.argv[2]
    fields = {}
    if len(sys.argv) > 3 and sys.argv[3] != "default":
        for kv in sys.argv[3].split(","):
            k, v = kv.split("=")
            fields[k] = bool(int(v)) if k == "gemv" else int(v)
    if label.startswith("fused"):  # fusedCOLxK: the one-kernel rmsnorm with those tiles
        col, kt = (int(x) for x in label[5:].split("x"))
        from mirage_formal import workloads

        g = workloads.rmsnorm_fused(int(b), col_tile=col, k_tile=kt)
    else:
        g = dict(candidates(name, int(b), 2, 4))[label]
    sched = {la.graph.key: Schedule(**fields) for la in launches(g, 128)
             if fields.get("split", 1) == 1 or la.graph.forloop % fields["split"] == 0}
    cg = compile_graph(g, schedules=sched)
    print(cg.summary())
    print("us", time_graph(cg, warmup=3, reps=5, graph=False))


if __name__ == "__main__":
    main()
