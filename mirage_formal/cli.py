"""The mirage-formal command line: superoptimize, verify, explain, compile and show tensor programs.

Every subcommand takes PROGRAM the same way: a workload name, a .py file that defines
'program' (it is executed as Python), or a μGraph file (our JSON, our text form, or Mirage's
JSON). Exit codes: 0 success, 1 a negative result (nothing accepted, a rejected μGraph, a
failed validation), 2 bad input (the message says what to change).

Subcommands are the modules of ``mirage_formal.commands`` (each registers itself).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import warnings
from collections.abc import Sequence
from typing import TextIO

from mirage_formal import commands
from mirage_formal.errors import CacheWarning, MirageError


def build_parser() -> argparse.ArgumentParser:
    doc = __doc__.split("\n\nSubcommands are")[0]
    p = argparse.ArgumentParser(prog="mirage-formal", description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    for m in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if m.name.startswith("_"):
            continue
        importlib.import_module(f"{commands.__name__}.{m.name}").register(sub)
    return p


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    """Our warnings as one line for the user; others as Python prints them."""
    if issubclass(category, CacheWarning):
        print(f"mirage-formal: warning: {message}", file=file or sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    warnings.showwarning = _show_warning
    try:
        return int(args.func(args))
    except MirageError as e:
        print(f"mirage-formal: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
