"""``mirage-formal show PROGRAM``: print a program or μGraph in the text form, run it once in
the float64 reference on random inputs, and optionally draw it (``--draw FILE.svg``)."""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from mirage_formal.commands._common import add_program, plain, program_from
from mirage_formal.errors import MirageError
from mirage_formal.semantics import random_inputs, run_reference

MAX_RUN_ELEMENTS = 2**28
"""Above this many input elements the float64 run is skipped (it would need > 2 GiB)."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("show", help="print a program or μGraph, its float64 result, and draw it",
                       description=plain(__doc__))
    add_program(p)
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the random inputs of the float64 run (default 0)")
    p.add_argument("--draw", metavar="FILE", default=None,
                   help="also draw the μGraph with graphviz into FILE (.svg, .png, .pdf or .dot); "
                        "without graphviz's 'dot' program the .dot description is written")
    p.add_argument("--no-run", action="store_true", help="skip the float64 run")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    prog = program_from(args)
    g = prog.graph
    print(g)
    if args.draw:
        from mirage_formal.draw import draw

        print(f"drew {draw(g, args.draw)}")
    if args.no_run:
        return 0
    n = sum(math.prod(i.shape) for i in g.inputs)
    if n > MAX_RUN_ELEMENTS:
        raise MirageError(f"the inputs hold {n} elements, too many to run here; pass --no-run")
    x = random_inputs(g, args.seed)
    t = time.perf_counter()
    outs = run_reference(g, x)
    dt = time.perf_counter() - t
    for i, o in enumerate(outs):
        print(f"output {i}: shape {list(o.shape)}  mean {np.mean(o):+.6g}  max|.| {np.max(np.abs(o)):.6g}")
    print(f"float64 reference on uniform(-1, 1) inputs (seed {args.seed}): {dt * 1e3:.1f} ms")
    return 0
