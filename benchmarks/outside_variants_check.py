"""A program outside the eight benchmarks, written 2026-11-23 to check the GPU stage's size
variants and 9-16-row gemv on it without a GPU: silu(X·W1)·W2 with 12 rows (an MLP's up and
down projection). Searches it (superoptimize, gpu=False, 2 workers, 300 s budget); for the
top 3 accepted μGraphs, verifies every size variant the GPU stage would measure (field
verifier + float64 re-check) and compiles every tuner schedule of each for sm_90.
Usage: python3 benchmarks/outside_variants_check.py; prints what it checked.
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mirage_formal as mf
from mirage_formal.codegen import compile_graph
from mirage_formal.codegen.lower import launches
from mirage_formal.codegen.tuning_rules import candidate_schedules
from mirage_formal.gpu_sizes import kernel_grids, variants_to_measure
from mirage_formal.ir.builder import Graph
from mirage_formal.optimize import make_config
from mirage_formal.verify import Verifier
from mirage_formal.verify.float64 import FloatRecheck

g = Graph()
X = g.input((12, 1024), "f16", "X")
W1 = g.input((1024, 512), "f16", "W1")
W2 = g.input((512, 1024), "f16", "W2")
g.output(g.matmul(g.silu(g.matmul(X, W1)), W2))
p = g.build()
t = time.time()
r = mf.superoptimize(p, budget_s=300, workers=2, gpu=False)
print(f"search {time.time()-t:.1f} s, complete={r.search.complete}, accepted={len(r.accepted)}, "
      f"units={r.search.stats.__dict__.get('units','')}")
print(r.codegen_notes)
cfg = make_config(p)
ver, rc = Verifier(p, seed=11), FloatRecheck(p)
nsched = ngemv = nvar = 0
for a in r.accepted[:3]:
    print("cand", kernel_grids(a.graph), round(a.cost.seconds * 1e6, 1))
    for v, c in [(a.graph, a.cost), *variants_to_measure(cfg, a.graph)]:
        if v is not a.graph:
            d = ver.check(v)
            e = rc.error(v, d.output_map)
            assert d.accepted and e < 1e-6, (d, e)
            nvar += 1
            print("   variant", kernel_grids(v), round(c.seconds * 1e6, 1), "verified, f64 err", f"{e:.1e}")
        for la in launches(v, 128):
            for s in candidate_schedules(la.graph):
                cg = compile_graph(v, arch="sm_90", load=False, schedules={la.graph.key: s})
                nsched += 1
                ngemv += "float ga" in cg.source
print(f"{nvar} variants verified; {nsched} schedules compiled for sm_90 ({ngemv} on the gemv path)")
