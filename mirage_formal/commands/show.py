"""``mirage-formal show PROGRAM``: build a benchmark program (or its hand-written μGraph), print
it in the text form and run it once in the float64 reference on fresh random inputs."""

from __future__ import annotations

import argparse
import time

import numpy as np

from mirage_formal import workloads
from mirage_formal.ir.serialize import load_any
from mirage_formal.semantics import random_inputs, run_reference


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("show", help="print a benchmark program or μGraph and its float64 result")
    p.add_argument("program", help=f"a workload ({', '.join(sorted(workloads.PROGRAMS))}) or a μGraph file")
    p.add_argument("--batch", type=int, default=1, help="batch size b (default 1)")
    p.add_argument("--handwritten", action="store_true", help="show the hand-written μGraph instead")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.program in workloads.PROGRAMS:
        g = (workloads.handwritten(args.program, args.batch) if args.handwritten
             else workloads.program(args.program, args.batch))
    else:
        g = load_any(args.program)[0]
    print(g)
    x = random_inputs(g, args.seed)
    t = time.perf_counter()
    outs = run_reference(g, x)
    dt = time.perf_counter() - t
    for i, o in enumerate(outs):
        print(f"output {i}: shape {list(o.shape)}  mean {np.mean(o):+.6g}  max|.| {np.max(np.abs(o)):.6g}")
    print(f"float64 reference on uniform(-1, 1) inputs (seed {args.seed}): {dt * 1e3:.1f} ms")
    return 0
