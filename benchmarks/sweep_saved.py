"""Sweep the sizes and schedule of one kernel of a saved superoptimize result on the GPU.

Usage (device): PYTHONPATH=. python3 benchmarks/sweep_saved.py SAVE_DIR/ugraphs.json [INDEX]
    [--grid 48,96,...] [--forloop 8,16,...] [--split 1,2,4] [--threads 256,512]
    [--field gemv=True ...] [--limit-s 120] [--out FILE.json]

The swept kernel is the μGraph's graph-defined kernel with a for-loop (the first one; the
others keep their tuned schedules from the saved ``schedule`` meta). Every combination of its
grid x-size and loop range (the block graph rebuilt as ``search.space.size_variants`` rebuilds
it: same function, other tiles) with a loop split and block size is emitted, compiled in a
pool of spawned NVRTC processes, validated against the float64 program once, and timed the way
the product times (``time_like_baselines``: CUDA-graph replays, L2 flushed, median of 40).
Combinations whose block count is nearest one or two waves of the GPU's SMs go first, and the
sweep stops at ``--limit-s``. Prints one line per combination and the fastest last; ``--out``
keeps them as JSON. What it finds is a question for the tuner and the search (did they measure
this size?), not a result of the product.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from profile_saved import parse_schedules  # noqa: E402

from mirage_formal.codegen import Schedule, compile_graph, launches  # noqa: E402
from mirage_formal.codegen.timing import device_inputs, time_like_baselines  # noqa: E402
from mirage_formal.codegen.validate import validate  # noqa: E402
from mirage_formal.ir.graph import GET, INPUT, KERNEL_OP, KernelGraph, make_kernel, make_op  # noqa: E402
from mirage_formal.ir.ops import KERNEL  # noqa: E402
from mirage_formal.ir.serialize import load_ugraph_records  # noqa: E402
from mirage_formal.search.space import _rebuild_block  # noqa: E402

SMS = 132


def regrid(graph: KernelGraph, gx: int, forloop: int) -> KernelGraph | None:
    """``graph`` with its first looped graph-defined kernel at grid x-size ``gx`` and loop range
    ``forloop`` (later nodes rebuilt on the new outputs), or None if the sizes do not divide."""
    memo: dict[Any, Any] = {}
    done = False
    for n in graph.nodes:
        if n.op == INPUT:
            continue
        srcs = [memo.get(s, s) for s in n.src]
        if n.op == KERNEL_OP:
            bg = n.attr("graph")
            if not done and bg.forloop > 1:
                done = True
                nb = _rebuild_block(bg, srcs, (gx, bg.grid[1], bg.grid[2]), forloop)
                if nb is None:
                    return None
            else:
                nb = _rebuild_block(bg, srcs, bg.grid, bg.forloop)
                if nb is None:
                    return None
            gets = make_kernel(nb, srcs)
            memo[n] = gets[0]
            for g in graph.nodes:
                if g.op == GET and g.src[0] is n:
                    memo[g] = gets[g.attr("index")]
        elif n.op == GET:
            continue
        else:
            memo[n] = make_op(n.op, srcs, n.attr_dict, KERNEL)
    return KernelGraph(graph.inputs, tuple(memo.get(o, o) for o in graph.outputs))


def _compile_only(args: tuple[KernelGraph, dict[str, Schedule]]) -> str | None:
    graph, sched = args
    try:
        compile_graph(graph, schedules=sched, load=False)
        return None
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("index", type=int, nargs="?", default=0)
    ap.add_argument("--grid", default="")
    ap.add_argument("--forloop", default="8,16,32")
    ap.add_argument("--split", default="1,2,4")
    ap.add_argument("--threads", default="256")
    ap.add_argument("--field", action="append", default=[], help="FIELD=VALUE on every combination")
    ap.add_argument("--limit-s", type=float, default=120.0)
    ap.add_argument("--jobs", type=int, default=14)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    graph, meta = load_ugraph_records(a.file)[a.index]
    program = _reference(a.file)
    base = parse_schedules(meta.get("schedule"), [la.graph.key for la in launches(graph, 128)])
    looped = next(n.attr("graph") for n in graph.nodes if n.op == KERNEL_OP and n.attr("graph").forloop > 1)
    extra = {k: ast.literal_eval(v) for k, v in (f.split("=", 1) for f in a.field)}
    grids = [int(x) for x in a.grid.split(",")] if a.grid else [looped.grid[0]]
    combos = []
    for gx in grids:
        for f in (int(x) for x in a.forloop.split(",")):
            g2 = regrid(graph, gx, f)
            if g2 is None:
                continue
            key = next(la.graph.key for la in launches(g2, 128) if la.graph.forloop > 1)
            blocks = gx * looped.grid[1] * looped.grid[2]
            for sp in (int(x) for x in a.split.split(",")):
                if f % sp:
                    continue
                for th in (int(x) for x in a.threads.split(",")):
                    s = replace(base.get(looped.key, Schedule()), threads=th, split=sp, **extra)
                    sched = {k: v for k, v in base.items()}
                    sched[key] = s
                    waves = blocks * sp / SMS
                    combos.append((min(abs(waves - 1), abs(waves - 2)), gx, f, sp, th, g2, sched))
    combos.sort(key=lambda c: c[:5])
    t0 = time.monotonic()
    with ProcessPoolExecutor(a.jobs, mp_context=get_context("spawn")) as pool:
        errs = list(pool.map(_compile_only, [(c[5], c[6]) for c in combos]))
    print(f"compiled {len(combos)} combinations in {time.monotonic() - t0:.1f} s, "
          f"{sum(e is not None for e in errs)} failed: {sorted({e for e in errs if e})[:3]}", flush=True)
    rows = []
    inputs = None
    memo: dict[Any, Any] = {}
    for (_, gx, f, sp, th, g2, sched), err in zip(combos, errs, strict=True):
        if time.monotonic() - t0 > a.limit_s:
            print("limit reached")
            break
        row: dict[str, Any] = {"grid_x": gx, "forloop": f, "split": sp, "threads": th}
        if err:
            row["error"] = err
        else:
            cg = compile_graph(g2, schedules=sched)
            rep = validate(cg, program, memo=memo)
            row["valid"] = bool(rep.ok)
            if rep.ok:
                inputs = inputs or device_inputs(cg, seed=1)
                row["us"] = round(time_like_baselines(cg, reps=40, inputs=inputs), 2)
        rows.append(row)
        print(row, flush=True)
    ok = [r for r in rows if "us" in r]
    if ok:
        print("fastest", min(ok, key=lambda r: r["us"]))
    if a.out:
        Path(a.out).write_text(json.dumps({"file": a.file, "fields": a.field, "rows": rows}, indent=1))


def _reference(path: str) -> KernelGraph:
    """The program a saved result was optimized from: its row.json names the workload."""
    from mirage_formal import workloads
    row = json.loads((Path(path).parent / "row.json").read_text())
    name = row["workload"]
    if name.startswith("outside:"):
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import search_outside
        return search_outside.PROGRAMS[name.split(":", 1)[1]](row["b"])
    return workloads.program(name, row["b"])


if __name__ == "__main__":
    main()
