"""A program outside the eight benchmarks, written 2026-11-23 (sixth session) to try the
prologue-first unit order and the register-resident tensor-core code on a shape and op mix
nothing was tuned on: softmax(tanh(Q)·K)·V, 4 heads, 128 queries, 2048 keys, head dim 64.
Searches it (superoptimize, gpu=False, 2 workers, BUDGET_S seconds, default 180), prints the
coverage, the input program's estimate, the five best with their found-at times, verification
bounds and float64 re-check errors, the best μGraph, and compiles it for sm_90 (no GPU needed).
Usage: python3 benchmarks/outside_tanh_attention_check.py [BUDGET_S]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_common import search_and_report

import mirage_formal as mf
from mirage_formal.codegen import compile_graph


def program() -> mf.KernelGraph:
    g = mf.Graph()
    q = g.input((4, 128, 64), "f16", "Q")
    k = g.input((4, 64, 2048), "f16", "K")
    v = g.input((4, 2048, 64), "f16", "V")
    e = g.exp(g.matmul(g.tanh(q), k))
    g.output(g.matmul(g.div(e, g.sum(e, axis=-1, keepdims=True)), v))
    return g.build()


def main() -> None:
    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 180.0
    prog = program()
    res = search_and_report(prog, budget, 5)
    inp = [a for a in res.accepted if a.graph.key == prog.key]
    print("input program estimate:", f"{inp[0].cost.seconds * 1e6:.2f} us" if inp else "not listed")
    best = res.accepted[0]
    print(best.graph)
    print(compile_graph(best.graph, arch="sm_90", load=False).summary())


if __name__ == "__main__":
    main()
