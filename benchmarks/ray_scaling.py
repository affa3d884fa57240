"""Scaling of the search over workers: the local process pool and Ray tasks at 1, 2, 4, 8 and
14 workers on one program's whole space (default gqa b=1, its default preset), with the
distribution of unit times and what limits the speedup.

    PYTHONPATH=. python3 benchmarks/ray_scaling.py --out benchmarks/results/ray_scaling_16core
    PYTHONPATH=. python3 benchmarks/ray_scaling.py --executors local --workers 1,2 \\
        --program rmsnorm --size rows=2 --size h=64 --size n=64 --preset norm \\
        --set "grid_sizes=[2, 16]" --set "forloop=[1, 4]" --out /tmp/scaling_tiny   # a smoke test

Each configuration runs ``run_search`` exactly as ``superoptimize`` does (Z3 oracle, float64
screen + prime-field verifier to 2^-64, built in each worker from the same recipe), cold: no
oracle disk cache, a fresh pool or Ray instance (``ray.init(num_cpus=N)``, started on this
machine and shut down after) per configuration. ``--budget S`` caps each configuration (a hard
cap, so a configuration that cannot finish reports its coverage); ``--full N,M`` lets those
worker counts run to the end (under ``--full-budget``). Timings are wall-clock seconds of
``run_search`` (Ray's start-up included for Ray, reported apart).

Speedup and efficiency. For configurations that finished: T(1) / T(N), with T(1) measured if
the one-worker run finished, else the *serial work* W = the sum of the unit times (each unit's
own run time, from the configuration that finished with the most workers) stands for T(1).
For configurations stopped by the budget: the projected time budget x W / (work of the units
they finished), labelled "projected". What limits the speedup: a greedy list schedule of the
measured unit times in dispatch order (what both executors do) gives the best makespan N
workers can reach, bounded below by max(W / N, longest unit); the gap between it and the
measured time is the executor's overhead (start-up, dispatch, result shipping, contention).

Writes ``--out``/scaling.json and ``--out``/scaling.md with the machine, versions and command.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import shlex
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_common import machine

from mirage_formal.optimize import SearchComponents, make_config
from mirage_formal.programs import load_program, parse_sizes
from mirage_formal.search import parse_overrides, run_search


def versions() -> dict[str, str]:
    out = {}
    for mod in ("z3", "numpy", "galois", "ray"):
        try:
            m = __import__(mod)
            v = getattr(m, "__version__", None) or getattr(m, "get_version_string", lambda: "?")()
            out[mod] = str(v)
        except ImportError:
            out[mod] = "not installed"
    return out


def list_schedule(times: list[float], n: int) -> float:
    """Makespan of dispatching ``times`` in order to the first free of ``n`` workers."""
    free = [0.0] * n
    heapq.heapify(free)
    end = 0.0
    for t in times:
        s = heapq.heappop(free)
        end = max(end, s + t)
        heapq.heappush(free, s + t)
    return end


def run_config(
    args: argparse.Namespace, executor: str, workers: int, budget: float | None
) -> dict[str, Any]:
    program = load_program(args.program, args.batch, parse_sizes(args.size))
    cfg = make_config(program, args.preset, parse_overrides(args.overrides))
    recipe = SearchComponents(program, ("eq", "sub"), 2.0**-64, 0, None, socket.gethostname())
    pruner, checker = recipe()
    ray_init_s = 0.0
    if executor == "ray":
        import ray

        t = time.monotonic()
        ray.init(
            num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False
        )
        ray_init_s = time.monotonic() - t
    t0 = time.monotonic()
    try:
        r = run_search(
            program,
            cfg,
            pruner,
            checker,
            workers=workers,
            progress=False,
            budget_s=budget,
            executor="ray" if executor == "ray" else "local",
            components=recipe,
        )
        wall = time.monotonic() - t0
    finally:
        if executor == "ray":
            import ray

            ray.shutdown()
    ut = {int(k): float(v) for k, v in r.extra["unit_seconds"].items()}
    return {
        "executor": executor,
        "workers": workers,
        "budget_s": budget,
        "wall_s": round(wall, 3),
        "ray_init_s": round(ray_init_s, 3),
        "units_done": r.units_done,
        "units_total": r.units_total,
        "complete": r.complete,
        "stopped": r.stopped,
        "accepted": len(r.accepted),
        "accepted_keys": [a.graph.key for a in r.accepted],
        "visited": r.stats.visited,
        "verified": r.stats.verified,
        "best_us": None if not r.accepted else round(r.accepted[0].cost.seconds * 1e6, 3),
        "unit_seconds": ut,
        "over_budget_pct": None
        if budget is None or r.complete
        else round(100 * (wall - budget) / budget, 2),
    }


def analyse(rows: list[dict[str, Any]]) -> dict[str, Any]:
    finished = [r for r in rows if r["complete"]]
    if not finished:
        return {"note": "no configuration finished the space: speedups are projections only"}
    # unit times from the fewest workers, the least loaded such run (smallest serial work):
    # with many workers sharing the cores each unit runs slower than alone
    ref = min(finished, key=lambda r: (r["workers"], sum(r["unit_seconds"].values())))
    times = [ref["unit_seconds"][i] for i in sorted(ref["unit_seconds"], key=int)]
    W = sum(times)
    q = statistics.quantiles(times, n=100) if len(times) >= 2 else times * 99
    dist = {
        "units": len(times),
        "serial_work_s": round(W, 2),
        "min_s": round(min(times), 4),
        "median_s": round(statistics.median(times), 4),
        "p90_s": round(q[89], 3),
        "p99_s": round(q[98], 3),
        "max_s": round(max(times), 3),
        "longest_unit": max(range(len(times)), key=lambda i: times[i]),
        "top5_share_of_work": round(sum(sorted(times)[-5:]) / W, 3) if W else None,
        "from": f"{ref['executor']} x{ref['workers']}",
    }
    t1 = {
        e: next(
            (
                r["wall_s"]
                for r in rows
                if r["executor"] == e and r["workers"] == 1 and r["complete"]
            ),
            None,
        )
        for e in {r["executor"] for r in rows}
    }
    for r in rows:
        base = t1.get(r["executor"]) or W
        r["speedup_base"] = "T(1) measured" if t1.get(r["executor"]) else "serial work W"
        if r["complete"]:
            r["time_s"] = r["wall_s"]
            r["time_kind"] = "measured"
        else:
            done_work = sum(ref["unit_seconds"].get(i, 0.0) for i in r["unit_seconds"])
            r["time_s"] = round(r["wall_s"] * W / done_work, 1) if done_work else None
            r["time_kind"] = "projected"
        r["speedup"] = None if not r["time_s"] else round(base / r["time_s"], 2)
        r["efficiency"] = None if r["speedup"] is None else round(r["speedup"] / r["workers"], 2)
        n = r["workers"]
        r["schedule_makespan_s"] = round(list_schedule(times, n), 2)
        r["bound_s"] = round(max(W / n, max(times)), 2)
        r["schedule_speedup_limit"] = round(W / r["schedule_makespan_s"], 2)
    # configurations measured on different code (a row's "code", when merged from several
    # runs) may accept different μGraphs; within one code version they must agree
    by_code: dict[str, set[tuple[str, ...]]] = {}
    for r in finished:
        by_code.setdefault(str(r.get("code", "")), set()).add(tuple(r["accepted_keys"]))
    return {"distribution": dist,
            "finished_configs_agree": all(len(v) == 1 for v in by_code.values()),
            "code_versions": sorted(by_code)}


def markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = [
        f"# Search scaling: {doc['program']} ({doc['preset']})",
        "",
        f"- machine: {m['cpu']}, {m['cores']} cores, load {m['load_avg_1m']} at start; "
        f"{m['platform']}; Python {m['python']}; commit {m['commit']}; {m['date']}",
        f"- versions: {json.dumps(doc['versions'])}",
        f"- command: `{doc['command']}`",
        f"- space: {doc['rows'][0]['units_total']} units; per-configuration budget "
        f"{doc['budget_s']} s (full runs: {doc['full']} under {doc['full_budget_s']} s)",
        "",
    ]
    a = doc["analysis"]
    lines += [
        "| executor | workers | time s | kind | units done | speedup | efficiency | "
        "list-schedule makespan s | bound max(W/N, longest) s | Ray start s | accepted | over budget % |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["rows"]:
        lines.append(
            f"| {r['executor']} | {r['workers']} | {r.get('time_s')} | {r.get('time_kind')} | "
            f"{r['units_done']}/{r['units_total']} | {r.get('speedup')} | {r.get('efficiency')} | "
            f"{r.get('schedule_makespan_s')} | {r.get('bound_s')} | {r['ray_init_s'] or '-'} | "
            f"{r['accepted']} | {r['over_budget_pct'] if r['over_budget_pct'] is not None else '-'} |"
        )
    if "distribution" in a:
        d = a["distribution"]
        lines += [
            "",
            "## Unit times",
            "",
            f"From {d['from']}: {d['units']} units, serial work W = {d['serial_work_s']} s; "
            f"min {d['min_s']} s, median {d['median_s']} s, p90 {d['p90_s']} s, p99 {d['p99_s']} s, "
            f"max {d['max_s']} s (unit {d['longest_unit']}); the 5 longest units are "
            f"{100 * (d['top5_share_of_work'] or 0):.0f}% of the work.",
            "",
            "What limits the speedup: with N workers no schedule beats max(W/N, longest unit); "
            "the list-schedule column is what dispatching in the enumerator's order reaches "
            "with these unit times and zero overhead; the measured time minus it is the "
            "executor's overhead (start-up, oracle construction per worker, dispatch).",
            "",
            "Finished configurations accept the same μGraphs (in the same order) within each "
            f"code version {a.get('code_versions', [''])}: {a['finished_configs_agree']}",
        ]
    else:
        lines += ["", a.get("note", "")]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", default="gqa")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", action="append", default=[])
    ap.add_argument("--preset", default=None)
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    ap.add_argument("--workers", default="1,2,4,8,14")
    ap.add_argument("--executors", default="local,ray", help="local, ray or both (comma-separated)")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per configuration")
    ap.add_argument(
        "--full", default="", help="worker counts allowed to run to the end (e.g. 8,14)"
    )
    ap.add_argument("--full-budget", type=float, default=200.0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    counts = [int(x) for x in args.workers.split(",") if x]
    full = {int(x) for x in args.full.split(",") if x}
    executors = [e.strip() for e in args.executors.split(",") if e.strip()]
    rows = []
    for ex in executors:
        # the most workers first: the unit times of a finished run feed the projections
        for n in sorted(counts, reverse=True):
            b = args.full_budget if n in full else args.budget
            print(f"[{time.strftime('%H:%M:%S')}] {ex} x{n} budget {b} s", flush=True)
            r = run_config(args, ex, n, b)
            print(
                f"    {r['wall_s']} s, {r['units_done']}/{r['units_total']} units, "
                f"{r['accepted']} accepted",
                flush=True,
            )
            rows.append(r)
    prog = load_program(args.program, args.batch, parse_sizes(args.size))
    cfg = make_config(prog, args.preset, parse_overrides(args.overrides))
    doc = {
        "program": f"{args.program} b={args.batch}",
        "preset": cfg.name,
        "machine": machine(),
        "versions": versions(),
        "pid": os.getpid(),
        "command": "PYTHONPATH=. python3 " + " ".join(shlex.quote(a) for a in sys.argv),
        "budget_s": args.budget,
        "full": sorted(full),
        "full_budget_s": args.full_budget,
        "rows": rows,
    }
    doc["analysis"] = analyse(rows)
    (out / "scaling.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "scaling.md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
