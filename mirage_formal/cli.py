"""The ``mirage-formal`` command line: discovers subcommands in ``mirage_formal.commands``.

Exit codes: 0 success, 1 a negative result (a rejected μGraph, a failed validation),
2 bad input (our own exceptions), as each subcommand documents.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from mirage_formal import commands
from mirage_formal.errors import MirageError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mirage-formal", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    for m in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"{commands.__name__}.{m.name}").register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except MirageError as e:
        print(f"mirage-formal: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
