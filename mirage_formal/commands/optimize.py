"""``mirage-formal optimize PROGRAM``: superoptimize a program, write its μGraphs best-first.

PROGRAM is a workload name (with ``--batch`` and optional ``--size NAME=INT``), a Python file
defining ``program``, or a μGraph file. Writes into ``--out`` (default
``mirage_out/<program>_b<batch>``): ``ugraphs.json`` (accepted μGraphs best-first, our JSON
format, readable by ``mirage-formal verify``), ``report.md``, and ``checkpoint.json`` plus the
oracle's cache, from which an interrupted run resumes when the same command is run again
(``--fresh`` starts over).

``--budget`` caps the whole command's wall-clock time (search, verification, float64 re-check,
code generation); what was found by then is written, and the report says how much of the space
was covered. ``--ray local`` runs the search's units as Ray tasks on a Ray instance started
here, ``--ray HOST:PORT`` on a running Ray cluster (docs/distributed.md; needs the ``ray``
extra). Ctrl-C (SIGINT) or SIGTERM stops the workers and saves the checkpoint; the same
command resumes.

Exit status: 0 when at least one μGraph was accepted, 1 when none was, 2 on bad input, 130
after SIGINT and 143 after SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from mirage_formal import workloads
from mirage_formal.formal import DEFAULT_SETS, available_sets
from mirage_formal.programs import load_program, parse_sizes
from mirage_formal.search import parse_overrides, preset_names


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("optimize", help="search, prune, verify and rank μGraphs for a program",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("program", help=f"a workload ({', '.join(sorted(workloads.PROGRAMS))}), a .py file "
                                   "defining `program`, or a μGraph file")
    p.add_argument("--batch", type=int, default=1, help="batch size of a workload (default 1)")
    p.add_argument("--size", action="append", default=[], metavar="NAME=INT",
                   help="override a workload size, e.g. --size kv=512 (repeatable)")
    p.add_argument("--preset", default=None, metavar="NAME|FILE.toml",
                   help="overrides on the search space, which is derived from the program by default "
                        "(its ops, inputs, shapes and the GPU's SM count): a shipped preset "
                        f"({', '.join(preset_names())}) or your own preset file by path; a preset "
                        "that cannot express the program is refused")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override one search-space field, e.g. --set max_block_ops=7 (repeatable)")
    p.add_argument("--budget", type=float, default=600.0,
                   help="wall-clock seconds for the whole command, a hard cap (default 600)")
    p.add_argument("--bound", type=float, default=2.0**-64,
                   help="false-accept probability each accepted μGraph is verified to (default 2^-64)")
    p.add_argument("--axioms", default=",".join(DEFAULT_SETS),
                   help=f"comma-separated axiom sets (default {','.join(DEFAULT_SETS)}; "
                        f"available: {', '.join(available_sets())})")
    p.add_argument("--workers", type=int, default=None,
                   help="units searched in parallel (default: every core here, or every CPU of "
                        "the Ray cluster with --ray)")
    p.add_argument("--ray", default=None, metavar="local|ADDRESS",
                   help="run the search's units as Ray tasks: 'local' starts Ray on this machine, "
                        "an address (HOST:PORT, ray://HOST:PORT, auto) joins a running cluster")
    p.add_argument("--out", default=None, help="output directory (default mirage_out/<program>_b<batch>)")
    p.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint in --out")
    p.add_argument("--no-gpu", action="store_true", help="rank by the cost model even if a GPU is present")
    p.add_argument("--seed", type=int, default=0, help="seed of the verifier and the float64 checks")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def _process_start() -> float:
    """When this process started, on the ``time.monotonic()`` clock (Linux: from /proc, so the
    budget also covers the interpreter's start and the imports; elsewhere: now)."""
    now = time.monotonic()
    try:
        import os

        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        age = uptime - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    return now - age if 0.0 <= age < 60.0 else now


def run(args: argparse.Namespace) -> int:
    started = _process_start()
    from mirage_formal.errors import MirageError
    from mirage_formal.optimize import superoptimize
    from mirage_formal.search.signals import SearchInterrupted, interrupt_handlers

    if args.workers is not None and args.workers < 1:
        raise MirageError(f"--workers {args.workers}: give at least 1 (1 searches in this process; "
                          "leave it out to use every core)")

    program = load_program(args.program, args.batch, parse_sizes(args.size))
    stem = Path(args.program).stem if args.program not in workloads.PROGRAMS else args.program
    out = Path(args.out) if args.out else Path("mirage_out") / f"{stem}_b{args.batch}"
    out.mkdir(parents=True, exist_ok=True)
    ck = out / "checkpoint.json"
    if args.fresh and ck.exists():
        ck.unlink()
    axioms = tuple(a.strip() for a in args.axioms.split(",") if a.strip())
    try:
        with interrupt_handlers():
            res = superoptimize(program, args.preset, budget_s=args.budget, bound=args.bound,
                                axioms=axioms, workers=args.workers, checkpoint=ck, seed=args.seed,
                                progress=not args.quiet, gpu=False if args.no_gpu else None,
                                oracle_cache=out / "oracle_cache.sqlite",
                                overrides=parse_overrides(args.overrides),
                                executor=None if args.ray is None else f"ray:{args.ray}",
                                started_at=started)
    except SearchInterrupted as e:
        if e.checkpoint is None:  # stopped before or after the search: nothing new to save
            e.checkpoint, e.units_done = str(ck), _units_saved(ck)
        print(e.message(), file=sys.stderr)
        return e.exit_code
    path = res.save(out)
    if args.json:
        print(json.dumps(res.summary(), indent=1, default=str))
    else:
        print(res.report())
        print(f"wrote {path} ({len(res.accepted)} μGraph(s), best first) and {out / 'report.md'}")
    return 0 if res.accepted else 1


def _units_saved(ck: Path) -> int:
    """Finished units recorded in checkpoint ``ck`` (0 if there is none or it is unreadable)."""
    try:
        return len(json.loads(ck.read_text()).get("done", []))
    except (OSError, ValueError, AttributeError):
        return 0
