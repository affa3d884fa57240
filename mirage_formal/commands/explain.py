"""``mirage-formal explain PROGRAM``: show the pruning oracle's decisions on sample partial
μGraphs of a program, with their reasons.

PROGRAM is read as by every subcommand (a workload, a .py file, a μGraph file). Kept
examples: every tensor of the workload's hand-written μGraph (when there is one) at both
levels, else the program's own tensors. Pruned examples: tensors that cannot lead to the
output (``formal.samples.wrong_tensors``) and the first pruned ones of a small search-like
stream. Each line gives the decision, the tier that answered, the time, the abstract
expression and the reason (the axioms of the unsat core for a keep). Exit code 0; 2 on bad
input (unknown program or axiom set, malformed axiom file).
"""

from __future__ import annotations

import argparse

from mirage_formal import workloads
from mirage_formal.commands._common import add_program, plain, program_from
from mirage_formal.errors import MirageError
from mirage_formal.formal.axioms import DEFAULT_SETS, available_sets, describe
from mirage_formal.formal.oracle import Decision, Oracle
from mirage_formal.formal.samples import mugraph_queries, search_stream, wrong_tensors
from mirage_formal.programs import parse_sizes


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("explain", help="show pruning decisions (kept/pruned, with reasons) for a program",
                       description=plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_program(p, handwritten=False)
    p.add_argument("--axioms", nargs="+", default=list(DEFAULT_SETS), metavar="SET",
                   help=f"axiom sets by name (default: {' '.join(DEFAULT_SETS)}; "
                        f"available: {', '.join(available_sets())})")
    p.add_argument("--axioms-dir", default=None, help="folder of axiom files (default: axioms/)")
    p.add_argument("--samples", type=int, default=6, help="pruned samples from the stream (default 6)")
    p.add_argument("--list-axioms", action="store_true", help="print the selected axioms first")
    p.set_defaults(func=run)


def _line(d: Decision, width: int = 90) -> str:
    e = d.expr if len(d.expr) <= width else d.expr[: width - 3] + "..."
    verdict = "KEEP " if d.keep else "PRUNE"
    return f"  {verdict} [{d.tier:>6} {d.elapsed_s * 1e3:6.2f} ms] {e}\n      {d.reason}"


def run(args: argparse.Namespace) -> int:
    loaded = program_from(args)
    prog = loaded.graph
    o = Oracle(prog, args.axioms, directory=args.axioms_dir)
    print(o.describe())
    if args.list_axioms:
        print("\n".join(describe(o.axioms)))
    print("reference:", "; ".join(t.text for t in o.outputs))
    hand = None
    if loaded.kind == "workload" and args.program in workloads.HANDWRITTEN:
        try:
            hand = workloads.handwritten(args.program, args.batch or 1, **parse_sizes(args.size))
        except (TypeError, MirageError):  # sizes the hand-written μGraph cannot take
            hand = None
    if hand is not None:
        shown = hand
        print(f"\nkept: tensors of the hand-written μGraph of {args.program}")
    else:
        shown = prog
        print(f"\nkept: tensors of the program {args.program}")
    seen: set[str] = set()
    for q in mugraph_queries(shown):
        d = o.decide(*q)
        if d.expr in seen:
            continue
        seen.add(d.expr)
        level = "block " if q[1] is not None else "kernel"
        print(f"{level}{_line(d)}")
    print("\npruned: tensors that cannot lead to the output")
    for n in wrong_tensors(prog):
        d = o.decide(n)
        seen.add(d.expr)
        print(f"kernel{_line(d)}")
    print("\npruned: first pruned tensors of a small search-like stream")
    k = 0
    for q in search_stream(prog, [shown], depth=1, cap=12):
        d = o.decide(*q)
        if d.keep or d.expr in seen:
            continue
        seen.add(d.expr)
        print(f"{'block ' if q[1] is not None else 'kernel'}{_line(d)}")
        k += 1
        if k >= args.samples:
            break
    s = o.stats
    print(f"\nstats: {s.queries} queries, {s.memory_hits} memory hits, {s.filter_prunes} filter "
          f"prunes, {s.z3_keeps} Z3 keeps, {s.z3_prunes} Z3 prunes, {s.z3_unknown} unknown")
    return 0
