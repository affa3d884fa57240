"""A program outside the eight benchmarks, written 2026-11-26 (twenty-first session) after the
GPU stage's size walk, to check on a shape and op mix it was not built on that every size the
walk can step to computes the program: attention with a residual, exp(Q·K)/Σ exp(Q·K) · V + R,
with 4 heads, 64 queries, 2048 keys and head dim 32. Searches it (superoptimize, gpu=False,
2 workers, BUDGET_S seconds, default 150), then walks two steps from each of the six best
μGraphs (``optimize.walk_step``: three neighbouring sizes a step, the step's last one next)
and verifies every neighbour with the field verifier and the float64 re-check, as the GPU
stage does before it tunes one. Prints one line per neighbour and a count; exits 1 if any
neighbour fails.
Usage: python3 benchmarks/outside_walk_check.py [BUDGET_S]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mirage_formal as mf
from mirage_formal import gpu_sizes as gs
from mirage_formal import optimize as opt
from mirage_formal import optimized
from mirage_formal.search.canon import structure_key
from mirage_formal.verify import Verifier
from mirage_formal.verify.float64 import FloatRecheck


def program() -> mf.KernelGraph:
    g = mf.Graph()
    q = g.input((4, 64, 32), "f16", "Q")
    k = g.input((4, 32, 2048), "f16", "K")
    v = g.input((4, 2048, 32), "f16", "V")
    r = g.input((4, 64, 32), "f16", "R")
    e = g.exp(g.matmul(q, k))
    p = g.div(e, g.sum(e, axis=-1, keepdims=True))
    g.output(g.add(g.matmul(p, v), r))
    return g.build()


def main() -> int:
    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 150.0
    prog = program()
    t = time.time()
    res = mf.superoptimize(prog, budget_s=budget, workers=2, gpu=False)
    print(f"search: {len(res.accepted)} accepted in {time.time() - t:.1f} s")
    cfg = opt.make_config(prog, None, None)
    verifier, recheck = Verifier(prog, seed=11), FloatRecheck(prog)
    n = bad = 0
    for a in res.accepted[:6]:
        tried, cur = {a.graph.key}, a.graph
        for _ in range(2):
            step = gs.walk_step(cfg, cur, tried)
            if not step:
                break
            for v, c in step:
                tried.add(v.key)
                verdict = verifier.check(v)
                err = recheck.error(v, verdict.output_map) if verdict.accepted else float("inf")
                ok = verdict.accepted and err < optimized.RECHECK_RTOL and structure_key(v) == structure_key(a.graph)
                n, bad = n + 1, bad + (not ok)
                print(f"  {gs.kernel_grids(cur)} -> {gs.kernel_grids(v)}: estimated "
                      f"{c.seconds * 1e6:.1f} µs, verified {verdict.accepted}, float64 error {err:.1e}")
            cur = step[-1][0]
    print(f"{n} walk neighbours of the six best: {n - bad} verified and re-checked, {bad} not")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
