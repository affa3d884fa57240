"""Which kinds of schedule win the autotuner's trials, from its logged measurements (no GPU).

Reads tuning logs (``benchmarks/data/tuning_measurements_*.jsonl.gz``: one line per trial of
superoptimize's GPU stage, each with the μGraph, every kernel's schedule and the measured
µs). A trial's *kind* is the set of schedule fields it sets away from the default, thread
count, split and L2 hints aside (those are the grid every kind is tried on). For each tuning
of one μGraph (one log file, one graph) with at least ``--min-trials`` valid trials, and each
kind tried there: does its best trial come within ``--tie`` of the μGraph's best (a win), and
how much slower would the best be without that kind (regret: best over the other kinds /
best; a trial in which any kernel of the class has the kind does not count), by the class
of the kernel that has it: a register-chain kernel (``tuning_rules.chained_matmuls``: a matmul
feeding another, attention's) or another. Writes a markdown table (``--out``).

Usage: python3 benchmarks/tuning_kinds.py [FILES...] [--out results/tuning_kinds.md]
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from kernel_times import ugraph_from_json  # noqa: E402

from mirage_formal.codegen.lower import launches  # noqa: E402
from mirage_formal.codegen.schedule import Schedule  # noqa: E402
from mirage_formal.codegen.tuning_rules import chained_matmuls  # noqa: E402

#: fields that place a kind on the grid rather than make it a kind (``min_blocks``: every
#: candidate of a chain kernel carries it since the nineteenth session)
GRID_FIELDS = ("threads", "split", "evict_first", "l2_fetch", "min_blocks")


def kind(sched: dict[str, Any]) -> str:
    base = Schedule().to_dict()
    diff = sorted(f"{k}={v}" for k, v in sched.items() if base.get(k) != v and k not in GRID_FIELDS)
    return ",".join(diff) or "plain"


def tunings(files: list[str], min_trials: int) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for f in files:
        with gzip.open(f, "rt") if f.endswith(".gz") else open(f) as fh:
            for line in fh:
                r = json.loads(line)
                if r.get("valid") and r.get("us"):
                    out[f, r["graph"]].append(r)
    return {k: v for k, v in out.items() if len(v) >= min_trials}


def table(groups: dict[tuple[str, str], list[dict[str, Any]]], tie: float) -> list[dict[str, Any]]:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for (where, _), rs in groups.items():
        try:
            chain = {la.graph.key for la in launches(ugraph_from_json(rs[0]["ugraph"], where), 128)
                     if chained_matmuls(la.graph)}
        except Exception:  # a log line from an older format: its kernels' classes are unknown
            continue
        best = min(r["us"] for r in rs)
        # a trial's kinds: one per kernel (a multi-kernel μGraph varies one kernel at a time),
        # each with its kernel's class (a register-chain kernel or another)
        trials = [({("chain" if key in chain else "other", kind(s))
                    for key, s in r["schedules"].items()}, r["us"]) for r in rs]
        for cls, k in set().union(*(ks for ks, _ in trials)):
            row = rows.setdefault((cls, k), {"class": cls, "kind": k, "tried": 0, "wins": 0,
                                             "regrets": []})
            row["tried"] += 1
            row["wins"] += min(us for ks, us in trials if (cls, k) in ks) <= best * (1 + tie)
            # without the kind: the best trial in which no kernel of the class has it
            others = [us for ks, us in trials if (cls, k) not in ks]
            if others:
                row["regrets"].append(min(others) / best)
    out = []
    for row in sorted(rows.values(), key=lambda r: (r["class"], -r["tried"])):
        rg = row.pop("regrets") or [1.0]
        out.append({**row, "max_regret": max(rg), "mean_regret": sum(rg) / len(rg)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--min-trials", type=int, default=6)
    ap.add_argument("--tie", type=float, default=0.02, help="a win: within this share of the best")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/tuning_kinds.md"))
    a = ap.parse_args()
    files = a.files or sorted(glob.glob(str(ROOT / "benchmarks/data/tuning_measurements_*.jsonl.gz")))
    groups = tunings(files, a.min_trials)
    rows = table(groups, a.tie)
    lines = ["# Which kinds of schedule win the autotuner's trials", "",
             f"`python3 benchmarks/tuning_kinds.py` over {len(files)} tuning logs "
             f"({len(groups)} tunings of one μGraph with at least {a.min_trials} valid trials). "
             f"A win: the kind's best trial within {a.tie:.0%} of the μGraph's best. Regret: how "
             "much slower the best would have been without that kind (the best trial in which no "
             "kernel of the class has it, over the best; class: a register-chain kernel or another; "
             "`plain`: the default but for the grid).",
             "",
             "| class | kind | tried | wins | max regret | mean regret |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['class']} | `{r['kind']}` | {r['tried']} | {r['wins']} | {r['max_regret']:.3f} | "
              f"{r['mean_regret']:.4f} |" for r in rows if r["tried"] >= 5]
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
