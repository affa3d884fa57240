"""How well the cost model ranks the μGraphs the GPU stage measured, under its own parameters
and under one parameter changed: the offline A/B of a single rate.

Reads tuning logs (``*.meas.jsonl`` or ``.gz``, as ``gpu_optimize.py`` writes them: every trial
with its μGraph and measured time), groups them by program (the file's name), keeps each
μGraph's fastest valid time, re-estimates every μGraph with the built-in target and with
``--set FIELD=VALUE`` applied to it (a ``cost.Target`` field; a value naming another field
takes that field's value), and prints per program: the μGraphs, Kendall's tau between
estimate and measured time, the regret of the model's top pick (its measured time over the
fastest measured), and the median |log(estimate / measured)|, for A (built-in) and B (changed).

The μGraphs are the ones some GPU stage chose to measure, so the comparison is biased toward
the model that chose them; a rate that ranks better on the other's choices too is the safer
keep.

    PYTHONPATH=. python3 benchmarks/rate_ranking.py --set f32_mm_flops=simt_flops \\
        'benchmarks/results/gpu_optimize_2026-11-28_s*/c*/*f32*.meas.jsonl.gz'

Imports the package only.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import gzip
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from mirage_formal.ir.serialize import VERSION, ugraphs_from_json
from mirage_formal.search.cost import TARGETS, Target, estimate


def _records(path: str) -> list[dict[str, Any]]:
    opener: Any = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def _program(path: str) -> str:
    m = re.search(r"([^/]+?)\.meas\.jsonl", path)
    return m.group(1) if m else path


def measured_graphs(paths: Sequence[str]) -> dict[str, dict[str, tuple[float, dict[str, Any]]]]:
    """program -> graph key -> (fastest valid measured µs, μGraph JSON)."""
    out: dict[str, dict[str, tuple[float, dict[str, Any]]]] = {}
    for path in paths:
        recs = _records(path)
        ugraphs = {r["graph"]: r["ugraph"] for r in recs if "ugraph" in r}
        d = out.setdefault(_program(path), {})
        for r in recs:
            k = r.get("graph")
            if not isinstance(k, str) or not r.get("valid") or not r.get("us") or k not in ugraphs:
                continue
            if k not in d or r["us"] < d[k][0]:
                d[k] = (float(r["us"]), ugraphs[k])
    return out


def kendall_tau(xs: Sequence[float], ys: Sequence[float]) -> float:
    agree = pairs = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            s = (xs[i] - xs[j]) * (ys[i] - ys[j])
            if s:
                pairs += 1
                agree += s > 0
    return (2 * agree - pairs) / pairs if pairs else math.nan


def scores(rows: Sequence[tuple[float, float]]) -> tuple[float, float, float]:
    """(Kendall tau, top pick's regret, median |log ratio|) of (measured, estimated) pairs."""
    us = [r[0] for r in rows]
    est = [r[1] for r in rows]
    pick = min(range(len(rows)), key=lambda j: est[j])
    errs = sorted(abs(math.log(e / u)) for u, e in rows)
    return kendall_tau(est, us), us[pick] / min(us), errs[len(errs) // 2]


def changed_target(base: Target, setting: str) -> Target:
    field, _, value = setting.partition("=")
    if not hasattr(base, field):
        raise SystemExit(f"--set {setting}: Target has no field {field!r}")
    v: Any = getattr(base, value) if hasattr(base, value) else float(value)
    changes: dict[str, Any] = {field: v}
    return dataclasses.replace(base, **changes)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+", help="tuning logs or glob patterns")
    ap.add_argument("--set", required=True, help="FIELD=VALUE for model B (VALUE: a number or a field)")
    ap.add_argument("--target", default="h100")
    args = ap.parse_args(argv)
    paths = sorted({p for pat in args.logs for p in glob.glob(pat)})
    a = TARGETS[args.target]
    b = changed_target(a, args.set)
    print(f"A: built-in {args.target}; B: {args.set}; {len(paths)} logs")
    print("| program | μGraphs | tau A | regret A | med. log err A | tau B | regret B | med. log err B |")
    print("|---|---|---|---|---|---|---|---|")
    for prog, graphs in sorted(measured_graphs(paths).items()):
        built = [(us, ugraphs_from_json(dict(u, format="mirage-formal.ugraph", version=VERSION))[0][0])
                 for us, u in graphs.values()]
        if len(built) < 3:
            continue
        cells = []
        for t in (a, b):
            tau, regret, err = scores([(us, estimate(g, t).seconds * 1e6) for us, g in built])
            cells += [f"{tau:.2f}", f"{regret:.2f}", f"{err:.2f}"]
        print(f"| {prog} | {len(built)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
