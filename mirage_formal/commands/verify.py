"""``mirage-formal verify PROGRAM CANDIDATES``: check μGraphs against a program over prime fields.

PROGRAM is a workload name (with ``--batch`` and optional ``--size name=value`` to shrink it),
a .py file that defines ``program`` (the file is executed as Python), or a μGraph file (our
JSON, Mirage's JSON or our text form; its first μGraph, or the one ``--index`` picks, is the
reference). CANDIDATES is a file of one or more μGraphs in our JSON or Mirage's (Mirage's
inputs take the reference's input names by position). One verdict is printed per μGraph
(``--json``: a JSON list of verdicts, each with an ``accepted`` field); a μGraph that cannot
be compared (an input the reference lacks, other output shapes) or lies outside the class
the bound covers gets a ``not_applicable`` verdict of its own and never costs the others.

Exit status: 0 when every μGraph is accepted, 1 when any is not (rejected, inconclusive or
not_applicable), 2 on bad input (an unreadable file, an unknown workload or option).
"""

from __future__ import annotations

import argparse
import json

from mirage_formal.commands._common import add_program, plain, program_from
from mirage_formal.errors import MirageError
from mirage_formal.ir.serialize import load_any
from mirage_formal.verify.verifier import Verifier


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("verify", help="check μGraphs against a program (prime-field test + float64)",
                       description=plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_program(p, handwritten=False)
    p.add_argument("candidates", help="a file of one or more μGraphs (our JSON, our text form or "
                                      "Mirage's JSON)")
    p.add_argument("--bound", type=float, default=2.0**-64,
                   help="false-accept probability to reach (default 2^-64)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: fresh, reported)")
    p.add_argument("--no-float", action="store_true", help="skip the float64 cross-check")
    p.add_argument("--json", action="store_true", help="print a JSON list of verdicts")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ref = program_from(args).graph
    names = [n.attr("name") for n in ref.inputs]
    cands = load_any(args.candidates, input_names=names)
    if not cands:
        raise MirageError(f"{args.candidates}: holds no μGraph")
    verifier = Verifier(ref, bound=args.bound, seed=args.seed, float_check=not args.no_float)
    verdicts = []
    for i, c in enumerate(cands):
        try:
            verdicts.append(verifier.check(c))
        except MirageError as e:  # this μGraph cannot be compared: its own verdict, not exit 2
            verdicts.append(verifier.not_applicable(c, f"{args.candidates} μGraph {i}: {e}"))
    if args.json:
        print(json.dumps([v.to_json() for v in verdicts], indent=1))
    else:
        for i, v in enumerate(verdicts):
            print(f"[{i}] {v}")
        n_ok = sum(v.accepted for v in verdicts)
        print(f"{n_ok}/{len(verdicts)} accepted")
    return 0 if all(v.accepted for v in verdicts) else 1
