"""A program outside the eight benchmarks, written 2026-11-23 (fifth session) to try the
split-aware cost model on a shape and op mix it was not fitted on: one RMSNorm feeding two
projections (two outputs; X 4x2048, Wq and Wk 2048x1024). Searches it (superoptimize,
gpu=False, 2 workers, 300 s) with the derived space, or with JSON overrides given as the first
argument (e.g. '{"max_block_ops": 10}'), and prints the top 3 accepted μGraphs with their
estimates, float64 re-check errors and the size variants the GPU stage would measure.
Usage: python3 benchmarks/outside_shared_norm_check.py [OVERRIDES_JSON]
"""
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mirage_formal as mf
from mirage_formal.gpu_sizes import kernel_grids, variants_to_measure
from mirage_formal.ir.builder import Graph
from mirage_formal.optimize import make_config
from mirage_formal.search.cost import input_cost

g = Graph()
X = g.input((4, 2048), "f16", "X")
Wq = g.input((2048, 1024), "f16", "Wq")
Wk = g.input((2048, 1024), "f16", "Wk")
n = g.rms_norm(X)
g.output(g.matmul(n, Wq))
g.output(g.matmul(n, Wk))
p = g.build()
ov = json.loads(sys.argv[1]) if len(sys.argv) > 1 else None
cfg = make_config(p, None, ov)
t = time.time()
r = mf.superoptimize(p, budget_s=300, workers=2, gpu=False, overrides=ov)
print(f"max_block_ops {cfg.max_block_ops}; search {time.time() - t:.1f} s, complete={r.search.complete}, "
      f"accepted={len(r.accepted)}, input estimated {input_cost(p).seconds * 1e6:.1f} us")
for a in r.accepted[:3]:
    print("cand", kernel_grids(a.graph), f"{a.cost.seconds * 1e6:.1f} us", f"f64 err {a.float64_error:.1e}")
    for v, c in variants_to_measure(cfg, a.graph):
        print("   size variant", kernel_grids(v), f"{c.seconds * 1e6:.1f} us")
