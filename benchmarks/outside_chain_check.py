"""A program outside the eight benchmarks, written 2026-11-24 (seventh session) after the
register chain and the two-level split combine, to see whether they apply to a shape and op
mix they were not built on: softmax(0.2·Q·K)·V with 2 heads, 64 queries, 1024 keys and head dim
32 (so 16-row tiles, 32-deep first products, 32-column outputs). Searches it (superoptimize,
gpu=False, 2 workers, BUDGET_S seconds, default 90), prints the best μGraphs, then for each of
the best three: whether its kernels take the register chain under the default schedule, and
that every schedule the autotuner may try for them (splits with the two-level combine
included) compiles for sm_90 (no GPU needed; validation on a GPU is the tuner's).
Usage: python3 benchmarks/outside_chain_check.py [BUDGET_S]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_common import search_and_report

import mirage_formal as mf
from mirage_formal.codegen import candidate_schedules, compile_graph, launches
from mirage_formal.codegen.layout import KernelLayout
from mirage_formal.codegen.schedule import Schedule


def program() -> mf.KernelGraph:
    g = mf.Graph()
    q = g.input((2, 64, 32), "f16", "Q")
    k = g.input((2, 32, 1024), "f16", "K")
    v = g.input((2, 1024, 32), "f16", "V")
    e = g.exp(g.mul_scalar(g.matmul(q, k), scalar=0.2))
    g.output(g.matmul(g.div(e, g.sum(e, axis=-1, keepdims=True)), v))
    return g.build()


def main() -> None:
    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 90.0
    prog = program()
    res = search_and_report(prog, budget, 3)
    for a in res.accepted[:3]:
        print(a.graph)
        for la in launches(a.graph, 128):
            chains = len(KernelLayout(la.graph, "k", 227 * 1024, Schedule()).chains)
            scheds = candidate_schedules(la.graph)
            for sc in scheds:
                compile_graph(a.graph, arch="sm_90", load=False, schedules={la.graph.key: sc})
            splits = sorted({sc.split for sc in scheds})
            print(f"    kernel {la.graph.key[:8]}: register chains {chains}; {len(scheds)} tuner "
                  f"schedules compile for sm_90 (splits {splits})")


if __name__ == "__main__":
    main()
