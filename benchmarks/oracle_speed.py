"""Oracle speed over a search-like query stream, for gqa and rmsnorm.

For each program: build the oracle (the reference saturated once), then replay the stream of
``formal.samples.search_stream`` (kernel-level op applications to depth 2 over the inputs;
block-level iterators, ops, accumulators and post-loop ops in the launch shapes of the
hand-written μGraph and of Mirage's published μGraphs), repeats included. Reports latency
percentiles of uncached queries (answered by the filter or by Z3), of Z3-answered ones alone,
the cache hit rate, the per-tier counters and the number of ``unknown`` answers.

    PYTHONPATH=. python benchmarks/oracle_speed.py [--out benchmarks/results/oracle_speed.md]
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import z3

from mirage_formal import workloads
from mirage_formal.formal.oracle import Oracle
from mirage_formal.formal.samples import search_stream
from mirage_formal.ir.mirage import load_mirage

CASES = [("rmsnorm", "rmsnorm_bs1.json", ["X", "W"]), ("gqa", "gqa_bs1.json", ["Q", "K", "V"])]


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) * 1e3 if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/oracle_speed.md")
    ap.add_argument("--checkpoints", default="/work/shared/mirage_checkpoints")
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--cap", type=int, default=40)
    args = ap.parse_args()
    rows = []
    for name, ck, ins in CASES:
        prog = workloads.program(name)
        mugraphs = [workloads.handwritten(name)]
        p = Path(args.checkpoints) / ck
        if p.is_file():
            mugraphs += load_mirage(p, ins)
        stream = search_stream(prog, mugraphs, depth=args.depth, cap=args.cap)
        t0 = time.perf_counter()
        o = Oracle(prog)
        build = time.perf_counter() - t0
        unc: list[float] = []
        z3t: list[float] = []
        t0 = time.perf_counter()
        for q in stream:
            d = o.decide(*q)
            if d.tier in ("filter", "z3", "z3-unknown"):
                unc.append(d.elapsed_s)
            if d.tier in ("z3", "z3-unknown"):
                z3t.append(d.elapsed_s)
        total = time.perf_counter() - t0
        s = o.stats
        rows.append((name, len(stream), len(mugraphs), build, total, unc, z3t, s))
        print(f"{name}: {len(stream)} queries, uncached p50 {pct(unc, 50):.2f} ms p99 "
              f"{pct(unc, 99):.2f} ms; z3 p50 {pct(z3t, 50):.2f} ms p99 {pct(z3t, 99):.2f} ms; "
              f"hit rate {s.hit_rate:.1%}; unknown {s.z3_unknown}", flush=True)
    lines = [
        "# Oracle speed (benchmarks/oracle_speed.py)",
        "",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}",
        f"- machine: {platform.machine()}, {platform.processor() or 'cpu'}, "
        f"{platform.system()} {platform.release()}; python {sys.version.split()[0]}; "
        f"z3 {z3.get_version_string()}",
        f"- command: `PYTHONPATH=. python benchmarks/oracle_speed.py` (depth {args.depth}, cap {args.cap})",
        "- axioms: eq + sub; single process, one oracle per program, memory cache only",
        "",
        "| program | queries | μGraphs (launch shapes) | oracle build s | stream s | uncached | "
        "uncached p50 ms | uncached p99 ms | max ms | Z3-answered | Z3 p50 ms | Z3 p99 ms | "
        "filter prunes | Z3 keeps | Z3 prunes | unknown | cache hit rate |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, n, nm, build, total, unc, z3t, s in rows:
        lines.append(
            f"| {name} | {n} | {nm} | {build:.2f} | {total:.2f} | {len(unc)} | {pct(unc, 50):.2f} | "
            f"{pct(unc, 99):.2f} | {max(unc) * 1e3:.1f} | {len(z3t)} | {pct(z3t, 50):.2f} | "
            f"{pct(z3t, 99):.2f} | {s.filter_prunes} | {s.z3_keeps} | {s.z3_prunes} | "
            f"{s.z3_unknown} | {s.hit_rate:.1%} |")
    lines += [
        "",
        "Targets (the project's oracle-speed goals): p50 <= 5 ms, p99 <= 100 ms per uncached query, zero unknown.",
        "'uncached' counts every query the caches did not answer (filter + Z3); the Z3 columns",
        "count only the queries Z3 decided. Mean of Z3-answered: "
        + ", ".join(f"{r[0]} {statistics.mean(r[6]) * 1e3:.2f} ms" for r in rows if r[6]) + ".",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
