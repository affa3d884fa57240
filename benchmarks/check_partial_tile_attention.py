"""A program outside the eight benchmarks, for the register chain's partial row tiles and k
slices: scaled attention with 24 query rows per head (one full and one partial 16-row tile), a
32-wide V and 8 heads. Searched from scratch (2 workers, 180 s, no GPU); the six best accepted
μGraphs are compiled for sm_90 under every schedule the tuner may try.

Usage: PYTHONPATH=. python3 benchmarks/check_partial_tile_attention.py
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_outside import partial_tile_attention

import mirage_formal as mf
from mirage_formal.codegen import candidate_schedules, compile_graph, launches
from mirage_formal.search.cost import input_cost

prog = partial_tile_attention(1)
t = time.time()
res = mf.superoptimize(prog, budget_s=180, workers=2, gpu=False)
print(f"search {time.time()-t:.0f} s; accepted {len(res.accepted)}")
print("input est us", round(input_cost(prog).seconds*1e6, 1))
n_compiled = chains = partial = kslice = 0
for a in res.accepted[:6]:
    print(round(a.cost.seconds*1e6, 1), "us est,", len(launches(a.graph, 128)), "kernels")
    for la in launches(a.graph, 128):
        for sc in candidate_schedules(la.graph):
            cg = compile_graph(a.graph, arch="sm_90", load=False, schedules={la.graph.key: sc})
            n_compiled += 1
            chains += "unsigned ea" in cg.source
            kslice += "kq = tile %" in cg.source
            partial += " && r < " in cg.source
print(f"compiled for sm_90: {n_compiled} (kernel, schedule) pairs; with a register chain {chains}, k slices {kslice}, partial row tiles {partial}")
