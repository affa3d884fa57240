"""Time a random sample of one program's search units and fingerprint what they did.

For a change to the enumerator that must not change the search (a faster inner loop, say):
run this before and after on the same sample; the fingerprint (a hash over every sampled
unit's statistics and the sequence of candidates it produced) must be equal, and the time
says how much was gained. The pruner and checker are the product's (Z3 oracle with the
default axiom sets, the verifier chain), built as ``superoptimize`` builds them; units run
one after another in this process, like the inline executor.

Usage: PYTHONPATH=. python3 benchmarks/search_unit_sample.py PROGRAM [COUNT] [SEED] [--batch B] [--warm] [--units I,J,...]
Prints "PROGRAM N units T s FINGERPRINT".
"""

from __future__ import annotations

import argparse
import hashlib
import random
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mirage_formal import workloads
from mirage_formal.formal import DEFAULT_SETS
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.optimize import SearchComponents, make_config
from mirage_formal.search.state import SearchState


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("program")
    ap.add_argument("count", type=int, nargs="?", default=12, help="units in the random sample")
    ap.add_argument("seed", type=int, nargs="?", default=1)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--units", type=lambda v: [int(x) for x in v.split(",")], default=None,
                    help="time these unit indices (e.g. a run's heaviest_units) instead of a "
                         "random sample")
    ap.add_argument("--warm", action="store_true",
                    help="run the sample once untimed first, so the oracle's answers are cached "
                         "and the time is the enumerator's own (a long search's steady state)")
    args = ap.parse_args()
    prog = workloads.program(args.program, args.batch)
    cfg = make_config(prog)
    oracle, checker = SearchComponents(prog, tuple(DEFAULT_SETS), 2.0**-64, 0, None,
                                       socket.gethostname())()
    moves = SearchState(prog, cfg, oracle, checker).enumerator().moves()
    idx = args.units if args.units is not None else sorted(
        random.Random(args.seed).sample(range(len(moves)), min(args.count, len(moves))))
    for i in idx if args.warm else ():
        SearchState(prog, cfg, oracle, checker).enumerator().run_move(moves[i])
    total = 0.0
    h = hashlib.sha256()
    for i in idx:
        st = SearchState(prog, cfg, oracle, checker)
        got: list[str] = []
        produce = st.on_candidate

        def record(g: KernelGraph, seed: bool = False, produce=produce,  # type: ignore[no-untyped-def]
                   got=got) -> None:
            got.append(g.key)
            produce(g, seed)

        st.on_candidate = record  # type: ignore[method-assign]
        t = time.perf_counter()
        st.enumerator().run_move(moves[i])
        total += time.perf_counter() - t
        s = st.stats
        h.update(repr((i, s.visited, s.candidates, s.pruned_shape, s.pruned_dedup, s.pruned_bound,
                       s.pruned_oracle, got)).encode())
    print(f"{args.program} {len(idx)} units {total:.1f} s {h.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
