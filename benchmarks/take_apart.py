"""Where a kernel's time goes, by taking it apart: the same kernel timed with one piece of its
emitted source removed at a time (device only; a probe, not a product measurement).

Usage: PYTHONPATH=. python3 benchmarks/take_apart.py [--rows W:B,...] [--fused B:COLxK,...]
    [--set FIELD=VALUE,...] [--edits NAME,...] [--rounds 2] [--out FILE.json]

Targets: each ``--rows`` row's best μGraph from ``benchmarks/results/gpu_optimize_latest.json``
with its tuned schedules, and each ``--fused`` one-kernel rmsnorm μGraph
(``workloads.rmsnorm_fused`` at batch B with COL-column, K-row tiles). ``--set`` overrides
fields of every kernel's schedule (for a fused target it is the whole schedule). The unedited
kernels are validated against the float64 program; an edited kernel computes something else
by design and is only timed. Every variant is timed the way the table times the product
(CUDA graph, 256 MB L2 flush before each run, median of 100), in ``--rounds`` alternating
rounds, so that drift between rounds shows.

The edits (:data:`EDITS`) are regular expressions over the emitted CUDA; an edit that finds
nothing to remove in a target is reported as not applicable rather than timed. Sessions 25-27
used ad-hoc versions of this to find that the fused rmsnorm kernel's products, not its fold,
X copies or launch-dependency instructions, are what it spends above a pure weight stream.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from retime_winners import parse_fields  # noqa: E402

from mirage_formal import workloads  # noqa: E402
from mirage_formal.codegen import Schedule, compile_graph, launches  # noqa: E402
from mirage_formal.codegen.compiled import CompiledGraph  # noqa: E402
from mirage_formal.codegen.nvrtc import compile_cubin  # noqa: E402
from mirage_formal.ir.graph import KernelGraph  # noqa: E402

TABLE = ROOT / "benchmarks" / "results" / "gpu_optimize_latest.json"


def _sub(pattern: str, repl: str) -> Callable[[str], str]:
    rx = re.compile(pattern)
    return lambda src: rx.sub(repl, src)


#: name -> (what it removes, the edit)
EDITS: dict[str, tuple[str, Callable[[str], str]]] = {
    "no_products": ("every tensor-core product (its fragment loads then go too, as dead code)",
                    _sub(r"mf::mma_16816\([^;]*;", "{}")),
    "no_launch_dependency": ("the programmatic-dependent-launch trigger and wait",
                             _sub(r"\n *mf::grid_dep_(?:launch|wait)\(\);", "")),
    "no_cache_policy": ("the L2 evict-first policy of every streamed copy and load",
                        lambda s: _sub(r"mf::cp_async16_pol<0>\(([^;]*), mf_pol\)", r"mf::cp_async16(\1)")(
                            _sub(r"mf::ld_rawn_pol<(\d+), 0>\(([^;]*?), mf_pol\)", r"mf::ld_rawn<\1>(\2)")(s))),
    "no_row_folds": ("the running sums of a row fold (sum, mean, rms) kept in registers",
                     _sub(r"\bfr\d+\[k\] \+= [^;]*;", "")),
    "no_fragment_folds": ("the running sums of a fold taken from the A fragments "
                          "(Schedule.fold_fragments)",
                          _sub(r"\bff\d+\[wm\]\[\d\] \+= [^;]*;", "")),
    "no_wgmma": ("every warpgroup MMA (Schedule.wgmma) with its fences, commits and waits: "
                 "the loop then only passes the TMA ring's stages through, the data side of "
                 "the loop alone (a fence left without an MMA would compile for sm_90, not "
                 "sm_90a, and trap: s34 c2)",
                 lambda s: _sub(r"\n *mf::wgmma_(?:fence|commit|wait_one|wait_all)\(\);", "")(
                     _sub(r"mf::wgmma_m64nNk16<\d+(?:, true)?>\([^;]*;", "{}")(s))),
    "no_ring_copies": ("every copy of the TMA ring (its producer arrives on each stage "
                       "without bytes): the consumers' side of the loop alone, on stale tiles",
                       lambda s: _sub(r"\n *mf::tma_load_2d(?:_multicast)?<\w+>\([^;]*;", "")(
                           _sub(r"mf::mbar_expect_tx\((&mf_full\[s\]), \d+\);",
                                r"mf::mbar_arrive(\1);")(s))),
}


def edited(src: str, names: list[str]) -> str | None:
    """``src`` with the named edits applied, or None if one of them changes nothing."""
    for name in names:
        new = EDITS[name][1](src)
        if new == src:
            return None
        src = new
    return src


def targets(rows: str, fused: str, over: dict[str, Any]) -> list[tuple[str, KernelGraph, dict[str, Schedule]]]:
    """(label, μGraph, schedule of each kernel) for every requested target."""
    out: list[tuple[str, KernelGraph, dict[str, Schedule]]] = []
    if rows:
        from retime_winners import overridden, winner
        table = {f"{r['workload']}:{r['b']}": r for r in json.loads(TABLE.read_text())}
        for name in rows.split(","):
            if name not in table or not table[name].get("best_ugraph"):
                raise SystemExit(f"--rows: no row {name} with a μGraph in {TABLE.name}")
            g, s = winner(table[name])
            out.append((f"{name} winner", g, overridden(g, s, over) if over else s))
    for spec in (x for x in fused.split(",") if x):
        b, tiles = spec.split(":")
        col, kt = (int(x) for x in tiles.split("x"))
        g = workloads.rmsnorm_fused(int(b), col_tile=col, k_tile=kt)
        out.append((f"rmsnorm fused b={b} {col}x{kt}", g,
                    {la.graph.key: replace(Schedule(), **over) for la in launches(g, 128)}))
    return out


def with_source(cg: CompiledGraph, src: str) -> CompiledGraph:
    """``cg`` rebuilt from edited source (same launches and kernels)."""
    return CompiledGraph(cg.graph, src, compile_cubin(src, cg.arch, name="take_apart.cu"),
                         cg.arch, cg.launches, cg.kernels)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="")
    ap.add_argument("--fused", default="", help="B:COLxK,... one-kernel rmsnorm μGraphs")
    ap.add_argument("--set", default="", help="FIELD=VALUE,... schedule fields for every kernel")
    ap.add_argument("--edits", default=",".join(EDITS),
                    help="edit names, each alone; join two with + to apply them together")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    variants = [["base"]] + [v.split("+") for v in a.edits.split(",") if v]
    for v in variants[1:]:
        for name in v:
            if name not in EDITS:
                raise SystemExit(f"--edits: no edit {name} (edits: {', '.join(EDITS)})")
    from mirage_formal.codegen.timing import device_inputs, time_like_baselines
    from mirage_formal.codegen.validate import validate

    results: list[dict[str, Any]] = []
    for label, g, sched in targets(a.rows, a.fused, parse_fields(a.set)):
        cg = compile_graph(g, schedules=sched)
        ok = bool(validate(cg, trials=1, seed=7).ok)
        xs = device_inputs(cg, seed=3)
        built: dict[str, CompiledGraph | None] = {}
        for v in variants:
            src = cg.source if v == ["base"] else edited(cg.source, v)
            built["+".join(v)] = None if src is None else (cg if v == ["base"] else with_source(cg, src))
        times: dict[str, list[float]] = {k: [] for k, c in built.items() if c is not None}
        for _ in range(a.rounds):
            for k in times:
                c = built[k]
                assert c is not None
                times[k].append(round(time_like_baselines(c, inputs=xs), 2))
        for k, c in built.items():
            r: dict[str, Any] = dict(target=label, variant=k, base_validated=ok,
                     us=times.get(k), applicable=c is not None)
            results.append(r)
            print(json.dumps(r), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))
    print("\n| target | variant | µs (rounds) | median |")
    print("|---|---|---|---|")
    for r in results:
        us = r["us"]
        print(f"| {r['target']} | {r['variant']} | {us if us else 'not applicable'} | "
              f"{statistics.median(us) if us else '-'} |")


if __name__ == "__main__":
    main()
