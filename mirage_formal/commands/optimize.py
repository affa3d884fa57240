"""``mirage-formal optimize PROGRAM``: superoptimize a program, write its μGraphs best-first.

PROGRAM is a workload name (with ``--batch`` and optional ``--size NAME=INT``), a Python file
defining ``program`` (the file is executed as Python), or a μGraph file. Writes into ``--out``
(default ``mirage_out/<program>_b<batch>``): ``ugraphs.json`` (accepted μGraphs best-first, our
JSON format, readable by ``mirage-formal verify``), ``report.md`` (with ``best.svg``, a drawing
of the best μGraph), and ``checkpoint.json`` plus the oracle's cache, from which an interrupted
run resumes when the same command is run again. A run that finished is not redone: the same
command says "already complete". ``--fresh`` starts over (checkpoint and oracle cache).

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
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from mirage_formal.commands._common import add_program, plain, program_from
from mirage_formal.formal import DEFAULT_SETS, available_sets
from mirage_formal.ir.serialize import atomic_write_text
from mirage_formal.search import parse_overrides, preset_names

DONE = "complete.json"
"""Written into --out when a run searched its whole space; names the job it finished."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("optimize", help="search, prune, verify and rank μGraphs for a program",
                       description=plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_program(p, index=True, handwritten=False)
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
    p.add_argument("--out", default=None, help="output folder (default mirage_out/<program>_b<batch>)")
    p.add_argument("--fresh", action="store_true",
                   help="start over: discard the checkpoint, the oracle cache and a finished run in --out")
    p.add_argument("--no-gpu", action="store_true", help="rank by the cost model even if a GPU is present")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the verifier's random trials and of the float64 checks (default 0)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
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


def _job(program_key: str, args: argparse.Namespace, axioms: tuple[str, ...],
         overrides: dict[str, Any]) -> str:
    """What makes two runs the same job (the budget and workers do not change the result of a
    search that finished)."""
    doc = {"program": program_key, "preset": args.preset, "overrides": overrides,
           "bound": args.bound, "axioms": list(axioms), "seed": args.seed, "no_gpu": args.no_gpu}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _finished(out: Path, job: str) -> dict[str, Any] | None:
    try:
        doc = json.loads((out / DONE).read_text())
    except (OSError, ValueError):
        return None
    if (not isinstance(doc, dict) or doc.get("job") != job or not (out / "ugraphs.json").is_file()
            or not (out / "report.md").is_file()):
        return None
    return doc


def _clear(out: Path) -> None:
    for name in ("checkpoint.json", DONE, "oracle_cache.sqlite", "oracle_cache.sqlite-wal",
                 "oracle_cache.sqlite-shm"):
        (out / name).unlink(missing_ok=True)


def run(args: argparse.Namespace) -> int:
    started = _process_start()
    from mirage_formal.errors import MirageError
    from mirage_formal.optimize import superoptimize
    from mirage_formal.search.signals import SearchInterrupted, interrupt_handlers

    if args.workers is not None and args.workers < 1:
        raise MirageError(f"--workers {args.workers}: give at least 1 (1 searches in this process; "
                          "leave it out to use every core)")

    prog = program_from(args)
    out = Path(args.out) if args.out else Path("mirage_out") / prog.name
    out.mkdir(parents=True, exist_ok=True)
    ck = out / "checkpoint.json"
    axioms = tuple(a.strip() for a in args.axioms.split(",") if a.strip())
    overrides = parse_overrides(args.overrides)
    job = _job(prog.graph.key, args, axioms, overrides)
    if args.fresh:
        _clear(out)
    done = _finished(out, job)
    if done is not None:
        n = int(done.get("accepted", 0))
        if args.json:
            print(json.dumps({"already_complete": True, "accepted": n, "out": str(out)}, indent=1))
            return 0 if n else 1
        print(f"already complete: {out} holds this job's result ({n} μGraph(s) accepted; "
              f"{out / 'report.md'}); run with --fresh to redo it")
        return 0 if n else 1
    (out / DONE).unlink(missing_ok=True)
    try:
        with interrupt_handlers():
            res = superoptimize(prog.graph, args.preset, budget_s=args.budget, bound=args.bound,
                                axioms=axioms, workers=args.workers, checkpoint=ck, seed=args.seed,
                                progress=not args.quiet, gpu=False if args.no_gpu else None,
                                oracle_cache=out / "oracle_cache.sqlite", overrides=overrides,
                                executor=None if args.ray is None else f"ray:{args.ray}",
                                started_at=started)
    except SearchInterrupted as e:
        if e.checkpoint is None:  # stopped before or after the search: nothing new to save
            e.checkpoint, e.units_done = str(ck), _units_saved(ck)
        print(e.message(), file=sys.stderr)
        return e.exit_code
    path = res.save(out)
    if res.search.complete and not res.not_rechecked:
        atomic_write_text(out / DONE, json.dumps({"job": job, "accepted": len(res.accepted)}) + "\n")
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
