"""Run a saved superoptimize result's μGraph under its tuned schedules, for Nsight Compute.

Usage (device): ncu --section SpeedOfLight ... python3 benchmarks/profile_saved.py
    SAVE_DIR/ugraphs.json [INDEX [FIELD=VALUE,...]]
``INDEX`` (default 0, the best) picks the accepted μGraph; its ``schedule`` meta (the
autotuner's ``Tuned.describe()``: ``KEY8:field=value,...; ...``) is parsed back into one
Schedule per kernel; ``FIELD=VALUE,...`` (e.g. ``half_tiles=True``) overrides those fields in
every kernel's schedule (but a split in a kernel it cannot divide). Prints each kernel's grid, threads, shared memory and schedule and the
median µs of a few CUDA-graph replays with the L2 flushed (``MF_PROFILE_REPS``, default 5;
more for a steadier median when comparing overrides).
"""

from __future__ import annotations

import ast
import os
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mirage_formal.codegen import Schedule, compile_graph, launches  # noqa: E402
from mirage_formal.codegen.schedule import split_ok  # noqa: E402
from mirage_formal.codegen.timing import time_graph  # noqa: E402
from mirage_formal.ir.serialize import load_ugraph_records  # noqa: E402


def parse_schedules(text: str | None, keys: list[str]) -> dict[str, Schedule]:
    """``Tuned.describe()`` back to {kernel key: Schedule} for the kernels in ``keys``."""
    out: dict[str, Schedule] = {}
    for part in (text or "").split(";"):
        if ":" not in part:
            continue
        prefix, short = part.strip().split(":", 1)
        fields = {}
        if short != "default":
            for kv in short.split(","):
                k, v = kv.split("=", 1)
                fields[k] = None if v == "None" else ast.literal_eval(v)
        for k in keys:
            if k.startswith(prefix) or prefix == "*":  # "*": every kernel
                out[k] = Schedule(**fields)
    return out


def main() -> None:
    records = load_ugraph_records(sys.argv[1])
    graph, meta = records[int(sys.argv[2]) if len(sys.argv) > 2 else 0]
    graphs = {la.graph.key: la.graph for la in launches(graph, 128)}
    keys = list(graphs)
    sched = parse_schedules(meta.get("schedule"), keys)
    if len(sys.argv) > 3:
        over = {k: ast.literal_eval(v) for k, v in (kv.split("=", 1) for kv in sys.argv[3].split(","))}
        # a kernel the override cannot apply to (a split of a loop-free kernel) keeps its own
        sched = {k: (replace(sched.get(k, Schedule()), **over)
                     if split_ok(graphs[k], over.get("split", 1)) else sched.get(k, Schedule()))
                 for k in keys}
    cg = compile_graph(graph, schedules=sched)
    print(cg.summary())
    print("us", time_graph(cg, warmup=2, reps=int(os.environ.get("MF_PROFILE_REPS", "5")), graph=True, flush_l2=True))


if __name__ == "__main__":
    main()
