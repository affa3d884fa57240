"""What several subcommands share: the PROGRAM argument and its options, and writing files.

Every subcommand that reads a program takes it the same way (``programs.read_program``): a
workload name, a ``.py`` file (which is run as Python), or a μGraph file in our JSON, our text
form or Mirage's JSON. Imports ``programs`` and ``workloads``.
"""

from __future__ import annotations

import argparse

from mirage_formal import workloads
from mirage_formal.programs import Program, parse_sizes, read_program

PROGRAM_HELP = (f"a workload ({', '.join(sorted(workloads.PROGRAMS))}); a .py file that defines "
                "'program' (the file is executed as Python); or a μGraph file (our JSON, our "
                "text form, or Mirage's JSON)")


def add_program(p: argparse.ArgumentParser, *, sizes: bool = True, index: bool = True,
                handwritten: bool = True) -> None:
    """Add PROGRAM and the options that shape it."""
    p.add_argument("program", metavar="PROGRAM", help=PROGRAM_HELP)
    p.add_argument("--batch", type=int, default=None,
                   help="batch size, for a workload or a .py whose program takes batch= (default 1)")
    if sizes:
        p.add_argument("--size", action="append", default=[], metavar="NAME=INT",
                       help="override a workload size, e.g. --size kv=512 (repeatable)")
    if index:
        p.add_argument("--index", type=int, default=None,
                       help="which μGraph of a file holding several (default 0)")
    if handwritten:
        p.add_argument("--handwritten", action="store_true",
                       help=f"use the workload's hand-written μGraph "
                            f"({', '.join(sorted(workloads.HANDWRITTEN))})")


def program_from(args: argparse.Namespace) -> Program:
    """The program the parsed arguments name (options that do not apply are refused)."""
    return read_program(args.program, batch=args.batch,
                        sizes=parse_sizes(getattr(args, "size", [])),
                        index=getattr(args, "index", None),
                        handwritten=getattr(args, "handwritten", False))


def plain(doc: str | None) -> str:
    """A module docstring as help text: reStructuredText's double backticks dropped."""
    return (doc or "").replace("``", "")
