"""Re-validate, under the current emitter, every kernel a tuning log recorded as failing
validation (device only for the re-validation; ``--list`` runs anywhere).

The autotuner validates every schedule before timing it and drops one that fails
(``codegen.autotune``): a wrong kernel never reaches a user, but each such failure is an
emitter bug that costs the search a candidate, and the logs keep its μGraph and schedules.
This script collects those records (``validation: FAIL`` in a record's ``error``; compile
errors and driver faults are other problems), drops repeats, and validates each again against
the float64 program on fresh random inputs. A failure the emitter has since fixed validates;
one still failing is an open bug.

Usage: PYTHONPATH=. python3 benchmarks/revalidate_failures.py [LOG ...] [--list] [--out FILE.json]
    (default LOG: benchmarks/data/tuning_measurements_*.jsonl.gz)

The thirty-fourth session found two emitter bugs this way (s34 c5; 51 of the 55 failures of
the s13-s32 logs were the first): register saves of one-row products read an unwritten tile,
and a register chain's k-sliced second product stored each warp's partial sums (both fixed;
``tests/codegen/test_register_saves.py``).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mirage_formal.codegen.schedule import Schedule  # noqa: E402
from mirage_formal.ir.graph import KernelGraph  # noqa: E402
from mirage_formal.ir.serialize import FORMAT, VERSION, ugraphs_from_json  # noqa: E402

FAIL_MARK = "validation: FAIL"


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:  # type: ignore[operator]
        return list(f)


def failures(paths: list[Path]) -> list[dict[str, Any]]:
    """Each distinct (μGraph, schedules) a log records as failing validation, with the first
    log that has it and its error."""
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for p in paths:
        for line in _lines(p):
            r = json.loads(line)
            if FAIL_MARK not in (r.get("error") or ""):
                continue
            key = json.dumps([r["ugraph"], r["schedules"]], sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            out.append({"log": p.name, "ugraph": r["ugraph"], "schedules": r["schedules"],
                        "error": r["error"]})
    return out


def rebuild(rec: dict[str, Any]) -> tuple[KernelGraph, dict[str, Schedule]]:
    """A record's μGraph and the schedule of each of its kernels (fields a later emitter
    added take their defaults)."""
    (g, _), = ugraphs_from_json({"format": FORMAT, "version": VERSION, "ugraphs": [rec["ugraph"]]})
    return g, {k: Schedule.from_dict(v) for k, v in rec["schedules"].items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="*", type=Path)
    ap.add_argument("--list", action="store_true", help="list the failures, validate nothing")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    paths = a.logs or sorted((ROOT / "benchmarks" / "data").glob("tuning_measurements_*.jsonl.gz"))
    recs = failures(paths)
    print(f"{len(recs)} distinct kernels failed validation in {len(paths)} logs: "
          f"{dict(collections.Counter(r['log'] for r in recs))}")
    if a.list:
        return
    from mirage_formal.codegen import compile_graph
    from mirage_formal.codegen.validate import validate

    results = []
    for i, rec in enumerate(recs):
        try:
            g, sched = rebuild(rec)
            rep = validate(compile_graph(g, schedules=sched), trials=2)
            ok: bool | None = rep.ok
            why = str(rep)
        except Exception as e:  # a record the current emitter cannot build: reported, not fatal
            ok, why = None, f"{type(e).__name__}: {e}"
        results.append({"i": i, "log": rec["log"], "ok": ok, "report": why[:300],
                        "was": rec["error"][:300]})
        print(f"{i:4d} {rec['log']}: {'validates' if ok else 'FAILS' if ok is False else 'error'}"
              f"  {why[:120]}", flush=True)
    print(dict(collections.Counter({True: "validates", False: "fails", None: "error"}[r["ok"]]
                                   for r in results)))
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
