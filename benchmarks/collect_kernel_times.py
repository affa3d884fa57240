"""Measure accepted μGraphs on the GPU and append them to the cost model's dataset.

On a GPU machine: gather candidate μGraphs for several programs, then autotune, validate and time
each through ``mirage_formal.codegen.autotune.tune`` (the call ``superoptimize`` makes in its GPU
stage: the fastest validated schedule, timed like the baselines), and append one record per
validated candidate to ``benchmarks/data/kernel_times.jsonl``
(schema in ``kernel_times.py``). Candidates come from

1. search results already in the repository (``--from``: folders holding ``<program>/ugraphs.json``,
   e.g. ``benchmarks/results/search_workloads_ugraphs``; the folder name is the program);
2. short searches run here (``--search-budget`` seconds each, ``--workers`` processes, no GPU in
   the search) for every program of ``--programs`` at every ``--batch``;
3. for each accepted structure, up to ``--variants`` size variants (other grid sizes and loop
   ranges of the same structure, cheapest first by the model): they differ in exactly what the
   cost model must predict, and codegen validation decides whether each one is correct.

Programs are the benchmark workloads and ``search_outside.PROGRAMS``. A candidate that fails to
compile or to validate is counted and reported, never recorded. Without a GPU, ``--dry-run``
gathers and prints the candidates (the CPU part of the pipeline).

    PYTHONPATH=. python3 benchmarks/collect_kernel_times.py --out $OUT/kernel_times.jsonl

Imports the package (codegen only when timing) and the sibling benchmark modules.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_times import DATA, Record, append
from search_outside import PROGRAMS as OUTSIDE

from mirage_formal import workloads
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.serialize import load_ugraphs
from mirage_formal.search import derive_config, estimate
from mirage_formal.search.space import Enumerator, Stats

DEFAULT_PROGRAMS = ["rmsnorm", "gated_mlp", "lora", "gqa", "mqa", "qknorm_gqa", "ntrans",
                    "scaled_attention", "norm_gain_matmul", "swish_matmul", "exp_bmm"]


def program(name: str, batch: int) -> KernelGraph:
    if name in workloads.PROGRAMS:
        return workloads.program(name, batch)
    if name in OUTSIDE:
        return OUTSIDE[name](batch)
    raise SystemExit(f"unknown program {name!r}; choose from {sorted(workloads.PROGRAMS) + sorted(OUTSIDE)}")


def variants(prog: KernelGraph, g: KernelGraph, n: int) -> list[KernelGraph]:
    """Up to ``n`` size variants of ``g``'s structure (itself first), cheapest first."""
    if n <= 1:
        return [g]
    e = Enumerator(prog, derive_config(prog), lambda *a: True, lambda _g: None, lambda: None, Stats())
    # the first 48 in the enumerator's order are enough to pick n cheap ones from
    vs = sorted(itertools.islice(e.variants(g), 48), key=lambda v: (estimate(v).seconds, v.key))
    out = [g] + [v for v in vs if v.key != g.key]
    return out[:n]


def from_results(dirs: list[str], batch: int) -> Iterator[tuple[str, KernelGraph]]:
    for d in dirs:
        for f in sorted(Path(d).glob("*/ugraphs.json")):
            name = f.parent.name
            try:
                prog = program(name, batch)
            except SystemExit:
                continue
            for g in load_ugraphs(f):
                if [n.shape for n in g.inputs] == [n.shape for n in prog.inputs]:
                    yield name, g


def from_search(name: str, batch: int, budget: float, workers: int) -> list[KernelGraph]:
    from mirage_formal.optimize import superoptimize

    with tempfile.TemporaryDirectory() as tmp:
        res = superoptimize(program(name, batch), budget_s=budget, workers=workers, gpu=False,
                            compile_best=False, oracle_cache=Path(tmp) / "oracle.sqlite")
    return [a.graph for a in res.accepted]


def gather(args: argparse.Namespace) -> dict[tuple[str, int], list[KernelGraph]]:
    out: dict[tuple[str, int], dict[str, KernelGraph]] = {}
    for b in args.batch:
        for name, g in from_results(args.from_dirs, b):
            if name in args.programs:
                out.setdefault((name, b), {})[g.key] = g
        if args.search_budget > 0:
            for name in args.programs:
                t = time.monotonic()
                gs = from_search(name, b, args.search_budget, args.workers)
                print(f"search {name} b{b}: {len(gs)} accepted in {time.monotonic() - t:.0f} s", flush=True)
                for g in gs:
                    out.setdefault((name, b), {})[g.key] = g
    final: dict[tuple[str, int], list[KernelGraph]] = {}
    for (name, b), gs in sorted(out.items()):
        prog = program(name, b)
        seen: dict[str, KernelGraph] = {}
        ordered = sorted(gs.values(), key=lambda g: (estimate(g).seconds, g.key))
        for g in ordered:  # every accepted structure first, then their variants
            seen.setdefault(g.key, g)
        for g in ordered:
            if len(seen) >= args.max_per_program:
                break
            for v in variants(prog, g, args.variants):
                seen.setdefault(v.key, v)
        final[name, b] = list(seen.values())[: args.max_per_program]
    return final


def measure(cands: dict[tuple[str, int], list[KernelGraph]], args: argparse.Namespace) -> list[Record]:
    from mirage_formal.codegen.autotune import tune
    from mirage_formal.codegen.runtime import runtime
    from mirage_formal.errors import MirageError

    gpu = runtime().name
    method = ("collect_kernel_times.py: mirage_formal.codegen.autotune.tune (as superoptimize's GPU "
              "stage): fastest validated schedule, CUDA-graph replay, L2 flushed before each of 100 "
              "runs, median")
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out: list[Record] = []
    for (name, b), gs in cands.items():
        prog = program(name, b)
        ok = failed = 0
        for g in gs:
            est = estimate(g).seconds * 1e6
            try:
                tuned = tune(g, prog, seed=args.seed,
                             context={"workload": name, "batch": b, "estimated_us": est})
            except MirageError as e:
                tuned = None
                print(f"  {name} b{b} {g.key[:12]}: {type(e).__name__}: {str(e).splitlines()[0]}", flush=True)
            if tuned is None:
                failed += 1
                print(f"  {name} b{b} {g.key[:12]}: no schedule validated", flush=True)
                continue
            ok += 1
            rec = Record(name, b, g, float(tuned.us), est, gpu, method, date)
            out.append(rec)
            append([rec], args.out)  # as we go: a crash keeps what was measured
        print(f"{name} b{b}: {ok} validated and timed, {failed} failed", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", nargs="*", default=DEFAULT_PROGRAMS)
    ap.add_argument("--batch", nargs="*", type=int, default=[1, 8])
    ap.add_argument("--from", dest="from_dirs", nargs="*",
                    default=[str(Path(__file__).parent / "results" / "search_workloads_ugraphs"),
                             str(Path(__file__).parent / "results" / "search_outside_ugraphs")])
    ap.add_argument("--search-budget", type=float, default=45.0, help="seconds per program (0: none)")
    ap.add_argument("--workers", type=int, default=14)
    ap.add_argument("--variants", type=int, default=4, help="size variants per accepted structure")
    ap.add_argument("--max-per-program", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(DATA))
    ap.add_argument("--dry-run", action="store_true", help="gather and list candidates; no GPU")
    args = ap.parse_args()
    t = time.monotonic()
    cands = gather(args)
    summary: dict[str, Any] = {f"{n} b{b}": len(gs) for (n, b), gs in cands.items()}
    print(json.dumps({"candidates": summary, "total": sum(summary.values()),
                      "gather_s": round(time.monotonic() - t, 1)}), flush=True)
    if args.dry_run:
        return 0
    recs = measure(cands, args)
    print(f"appended {len(recs)} records over {len({(r.workload, r.batch) for r in recs})} (program, batch) "
          f"pairs to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
