"""Fuzz every file format the package reads with many mutants, and record the counts.

    PYTHONPATH=. python3 benchmarks/fuzz_files.py --examples 2000 --out benchmarks/results

Uses the mutators and rules of ``tests/file_fuzz.py`` (the CI fuzz suite runs the same with a
few dozen examples per format). For each format it counts mutants accepted (still valid),
refused with a package error, and failures: a Python exception, a hang, or an invalid file
accepted (the first failure of a format is recorded with its message; there should be none).
Writes ``fuzz_files.json`` and ``fuzz_files.md`` into --out.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from file_fuzz import TARGETS, cache_damage, cache_round, classify  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def run_target(name: str, examples: int) -> dict[str, object]:
    counts: Counter[str] = Counter()
    t = TARGETS.get(name)
    seed = t.seed() if t is not None else ""

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def one(data: st.DataObject) -> None:
        if t is None:
            counts[cache_round(data.draw(cache_damage()))] += 1
        else:
            counts[classify(t, data.draw(t.mutants(seed)))] += 1

    t0 = time.perf_counter()
    failure = None
    try:
        one()
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        failure = f"{type(e).__name__}: {str(e)[:600]}"
    return {"format": name, "examples": sum(counts.values()), **dict(counts),
            "failure": failure, "seconds": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=1000, help="mutants per format (default 1000)")
    ap.add_argument("--out", default="benchmarks/results", help="folder for the results")
    ap.add_argument("--formats", default=None,
                    help="comma-separated formats to run (default all); their rows replace those "
                         "of an existing fuzz_files.json in --out")
    args = ap.parse_args()
    names = [*sorted(TARGETS), "oracle_cache"]
    chosen = args.formats.split(",") if args.formats else names
    old = Path(args.out) / "fuzz_files.json"
    kept = {r["format"]: r for r in json.loads(old.read_text())["rows"]} if args.formats and old.is_file() else {}
    for name in chosen:
        r = run_target(name, args.examples)
        print(json.dumps(r), flush=True)
        kept[name] = r
    rows = [kept[n] for n in names if n in kept]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    info = {"machine": f"{platform.machine()} {os.cpu_count()} cores", "load_1min_at_end": round(load, 2),
            "examples_per_format": args.examples}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fuzz_files.json").write_text(json.dumps({"info": info, "rows": rows}, indent=1) + "\n")
    cols = ["format", "examples", "accepted", "refused", "intact", "dropped", "failure", "seconds"]
    md = [f"# File fuzzing ({info['machine']}, load {info['load_1min_at_end']}, "
          f"`--examples {args.examples}`)", "",
          "accepted: still a valid file; refused: a package error (exit 2 on the command line); "
          "for the oracle cache, intact: every row read back, dropped: damaged rows read as misses "
          "and recomputed, refused: the file is not a database. failure: a Python exception, a "
          "hang or an invalid file accepted (none expected).", "",
          "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join(str(r.get(c, 0) if r.get(c) is not None else "none") for c in cols) + " |"
           for r in rows]
    (out / "fuzz_files.md").write_text("\n".join(md) + "\n")
    print(f"wrote {out / 'fuzz_files.md'}")


if __name__ == "__main__":
    main()
