"""Where a kernel's time goes, phase by phase, measured inside the kernel (device only).

Usage: PYTHONPATH=. python3 benchmarks/phase_probe.py [--rows W:B,...] [--table FILE]
    [--runs 5] [--set FIELD=VALUE,...] [--edits NAME,...] [--out FILE.json]

For each row of ``benchmarks/results/gpu_optimize_latest.json`` (or ``--table``) the row's best
μGraph is compiled with its tuned schedules (``--set`` overrides fields of every kernel's
schedule), validated, then compiled again with probes: thread 0 of every block records the
GPU's global timer (ns) and its SM at five points of each kernel — entry, after the wait for the
previous kernel (``griddepcontrol.wait``), before the main loop, after it, and at exit (and, in
a TMA ring kernel, the SM cycles its consumer loop spent waiting for the ring's copies against
the loop's cycles: ``ring wait share``) — into a
``__device__`` array read back after a CUDA-graph replay that follows the same 256 MB L2 flush
the product's timing uses. Per kernel it prints the span (first entry to last exit), the spread
of block entries, and the median block's wait, prologue, loop and tail (after-loop reductions,
split combine, stores), and the gap from the previous kernel's last exit to this one's first
entry. The probes add a few instructions per block, outside the loop.

The timer's resolution on the H100 is 32 ns (it advances in steps of that size), fine for the
microsecond phases this is for.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from retime_winners import parse_fields, winner  # noqa: E402
from take_apart import edited  # noqa: E402

from mirage_formal.codegen import Schedule, compile_graph, launches  # noqa: E402
from mirage_formal.codegen.compiled import CompiledGraph  # noqa: E402
from mirage_formal.codegen.nvrtc import compile_cubin  # noqa: E402
from mirage_formal.codegen.timing import device_inputs, time_graph, time_like_baselines  # noqa: E402
from mirage_formal.codegen.validate import validate  # noqa: E402

SLOTS = ("entry", "waited", "loop", "looped", "exit", "combined")
#: two more slots a block's thread 0 fills in a TMA ring kernel's consumer loop (SM clock
#: cycles, not timer ns): the cycles it spent waiting on the ring's "full" barriers, and the
#: loop's cycles; their ratio says whether the loop waits on the copies or on its own work
CYCLE_SLOTS = ("ring_wait_cycles", "loop_cycles")
WIDTH = len(SLOTS) + len(CYCLE_SLOTS) + 1  # (then the SM)
MAX_BLOCKS = 8192

PROBE_PRELUDE = f"""
__device__ unsigned long long mf_probe[{{nk}} * {MAX_BLOCKS} * {WIDTH}];
__device__ __forceinline__ unsigned long long* mf_slots(int k) {{
  const unsigned int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  return b < {MAX_BLOCKS} ? mf_probe + ((size_t)k * {MAX_BLOCKS} + b) * {WIDTH} : nullptr;
}}
__device__ __forceinline__ void mf_mark(int k, int slot) {{
  if (threadIdx.x != 0) return;
  unsigned long long t; unsigned int sm;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  unsigned long long* p = mf_slots(k);
  if (p == nullptr) return;
  p[slot] = t;
  if (slot == 0) p[{WIDTH - 1}] = sm;
}}
__device__ __forceinline__ void mf_cycles(int k, long long wait, long long loop) {{
  unsigned long long* p = threadIdx.x == 0 ? mf_slots(k) : nullptr;
  if (p == nullptr) return;
  p[{len(SLOTS)}] = (unsigned long long)wait;
  p[{len(SLOTS) + 1}] = (unsigned long long)loop;
}}
"""

#: the consumer loop's wait for a TMA ring stage (emit.emit_tma_loop)
RING_WAIT = "    mf::mbar_wait(&mf_full[mf_s], mf_ph);"


def instrument(source: str, names: list[str]) -> str:
    """``source`` with probe marks in each kernel of ``names`` (in launch order)."""
    lines = source.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r'extern "C" __global__ .*?(mf_\w+)\($', line)
        if m is None:
            out.append(line)
            i += 1
            continue
        k = names.index(m.group(1))
        # the parameter list, then the body up to the function's closing brace
        j = i
        while not lines[j].endswith(") {"):
            j += 1
        out += lines[i:j + 1]
        out.append(f"  mf_mark({k}, 0);")
        body_end = j + 1
        while lines[body_end] != "}":
            body_end += 1
        body = lines[j + 1:body_end]
        b = 0
        while b < len(body):
            ln = body[b]
            if ln.startswith(("  for (int it0 = 0;", "  for (int it = 0;")):
                # (the second: a TMA ring kernel's consumer loop; its producer's loop is
                # indented deeper and not marked)
                ring = ln.startswith("  for (int it = 0;")
                out.append(f"  mf_mark({k}, 2);")
                if ring:  # (thread 0's cycles waiting on the ring, and the loop's)
                    out.append("  long long mf_cw = 0; const long long mf_cl = clock64();")
                out.append(ln)
                b += 1
                while body[b] != "  }":  # the loop's body is indented deeper
                    if ring and body[b] == RING_WAIT:
                        out.append(f"    {{ const long long mf_c0 = clock64();{RING_WAIT[3:]}"
                                   " mf_cw += clock64() - mf_c0; }")
                    else:
                        out.append(body[b])
                    b += 1
                out.append(body[b])
                out.append(f"  mf_mark({k}, 3);")
                if ring:
                    out.append(f"  mf_cycles({k}, mf_cw, clock64() - mf_cl);")
                b += 1
                continue
            if ln.strip().endswith(" return;"):  # a split block that leaves the combine early
                out.append(ln.replace(" return;", f" {{ mf_mark({k}, 4); return; }}"))
                if "mf_ticket" in ln or "mf_split" in ln:  # the block that goes on combines
                    out.append(f"  mf_mark({k}, 5);")
                b += 1
                continue
            out.append(ln)
            if ln.strip() == "mf::grid_dep_wait();":
                out.append(f"  mf_mark({k}, 1);")
            b += 1
        out.append(f"  mf_mark({k}, 4);")
        out.append("}")
        i = body_end + 1
    src = "\n".join(out)
    head = '#include "mf_tile.cuh"\n'
    return src.replace(head, head + PROBE_PRELUDE.replace("{nk}", str(len(names))), 1)


def probe_row(row: dict[str, Any], runs: int, overrides: dict[str, Any],
              edits: list[str] | None = None) -> dict[str, Any]:
    graph, sched = winner(row)
    if overrides:
        sched = {la.graph.key: replace(sched.get(la.graph.key) or Schedule(), **overrides)
                 for la in launches(graph, 128)}
    cg = compile_graph(graph, schedules=sched)
    rep = validate(cg, trials=2, seed=7, low=-0.5, high=0.5)
    xs = device_inputs(cg, seed=3)
    us = time_like_baselines(cg, inputs=xs) if rep.ok else None
    names = [k.name for k in cg.kernels]
    uniq = list(dict.fromkeys(names))
    base = cg.source
    if edits:  # (take_apart's edits: the probed kernel computes something else by design)
        cut = edited(base, edits)
        if cut is None:
            raise SystemExit(f"--edits {','.join(edits)}: one of them changes nothing here")
        base = cut
    src = instrument(base, uniq)
    cubin = compile_cubin(src, cg.arch, name=f"probe_{graph.key[:16]}.cu")
    pg = CompiledGraph(graph, src, cubin, cg.arch, cg.launches, cg.kernels)
    pg.load()
    rt = pg._rt
    assert rt is not None
    ptr, size = rt.ck(rt.drv.cuModuleGetGlobal(pg._module, b"mf_probe"), "cuModuleGetGlobal")
    host = np.zeros(int(size) // 8, dtype=np.uint64)
    per_run = []
    for _ in range(runs):
        rt.fill32(int(ptr), 0, int(size) // 4)
        probed_us = time_graph(pg, warmup=0, reps=1, graph=True, flush_l2=True, inputs=xs)
        rt.sync()
        rt.dtoh(host, int(ptr))
        arr = host.reshape(len(uniq), MAX_BLOCKS, WIDTH).astype(np.int64)
        kernels = []
        prev_exit = None
        for k in cg.kernels:  # a kernel launched twice keeps the second launch's marks
            a = arr[uniq.index(k.name)]
            nb = min(int(np.prod(k.grid)), MAX_BLOCKS)
            a = a[:nb]
            t0 = int(a[:, 0].min())
            rel = {s: a[:, j] - t0 for j, s in enumerate(SLOTS)}
            waits, loops = a[:, len(SLOTS)], a[:, len(SLOTS) + 1]
            ringed = loops > 0  # (blocks of a TMA ring kernel's consumer loop)

            def med(x: str, y: str, rel: dict[str, Any] = rel, q: float = 50) -> float | None:
                has = (rel[x] > -10**12) & (rel[y] > -10**12)  # blocks that passed both marks
                if not has.any():
                    return None  # a mark this kernel does not have (no main loop, no split)
                return float(np.percentile((rel[y] - rel[x])[has], q)) / 1000.0
            kernels.append({
                "kernel": k.name, "grid": list(k.grid), "threads": k.threads,
                "sms": len(set(a[:, WIDTH - 1].tolist())),
                "span_us": float(rel["exit"].max()) / 1000.0,
                "entry_spread_us": float(rel["entry"].max()) / 1000.0,
                "wait_us": med("entry", "waited"), "prologue_us": med("waited", "loop"),
                "loop_us": med("loop", "looped"), "loop_max_us": med("loop", "looped", q=100),
                "tail_us": med("looped", "exit"),
                # the blocks that combine a split: their loop's end to the ticket, and the rest
                "ticket_us": med("looped", "combined"), "after_ticket_us": med("combined", "exit"),
                "slowest_block_us": float((rel["exit"] - rel["entry"]).max()) / 1000.0,
                "gap_from_previous_us": None if prev_exit is None else (t0 - prev_exit) / 1000.0,
                "t0_ns": t0,
                # each block's loop end and exit (µs after the first entry) and its SM: which
                # blocks are late, and whether the same ones are late run after run
                "block_looped_us": [round(float(v) / 1000.0, 3) if v > -10**12 else None
                                    for v in rel["looped"].tolist()],
                "block_exit_us": [round(float(v) / 1000.0, 3) for v in rel["exit"].tolist()],
                "block_sm": a[:, WIDTH - 1].tolist(),
                # a TMA ring loop: the median block's share of its loop spent waiting for
                # the ring's copies (thread 0, SM cycles)
                "ring_wait_share": (float(np.median(waits[ringed] / loops[ringed]))
                                    if ringed.any() else None),
            })
            prev_exit = int(a[:, 4].max())
        per_run.append({"probed_us": probed_us, "kernels": kernels})
    return {"row": f"{row['workload']}:{row['b']}", "schedule": row.get("schedule"),
            "validated": rep.ok, "us": us, "runs": per_run}


def summarize(res: dict[str, Any]) -> list[str]:
    out = [f"{res['row']}: {res['us'] and round(res['us'], 1)} µs (probed "
           f"{round(statistics.median(r['probed_us'] for r in res['runs']), 1)})  {res['schedule']}"]
    nk = len(res["runs"][0]["kernels"])
    for i in range(nk):
        ks = [r["kernels"][i] for r in res["runs"]]

        def m(f: str, ks: list[dict[str, Any]] = ks) -> str:
            v = [k[f] for k in ks if k[f] is not None]
            return f"{statistics.median(v):6.2f}" if v else "     -"
        k = ks[0]
        out.append(f"  {k['kernel'][:22]:22s} grid {k['grid']} x{k['threads']} on {k['sms']} SMs | "
                   f"gap {m('gap_from_previous_us')} span {m('span_us')} entries {m('entry_spread_us')}"
                   f" | wait {m('wait_us')} prologue {m('prologue_us')} loop {m('loop_us')} "
                   f"(max {m('loop_max_us')}) tail {m('tail_us')} [ticket {m('ticket_us')} then "
                   f"{m('after_ticket_us')}] | slowest block {m('slowest_block_us')}"
                   f" | ring wait share {m('ring_wait_share')}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", default=str(ROOT / "benchmarks/results/gpu_optimize_latest.json"))
    ap.add_argument("--rows", default="", help="W:B,... (default: every row)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--set", default="", help="FIELD=VALUE,... applied to every kernel's schedule")
    ap.add_argument("--edits", default="",
                    help="NAME,... of take_apart.py's edits applied before the probes (the "
                         "unedited kernel is still the one validated and timed as 'us')")
    ap.add_argument("--ugraph", action="append", default=[],
                    help="LABEL=FILE=SCHEDULE: probe the μGraph in FILE (text form) under SCHEDULE "
                         "(as the table writes it: PREFIX:FIELD=VALUE,...;...) instead of table rows")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    rows = json.loads(Path(a.table).read_text())
    want = [r for r in a.rows.split(",") if r]
    if want:
        rows = [r for r in rows if f"{r['workload']}:{r['b']}" in want]
    if a.ugraph:
        rows = []
        for spec in a.ugraph:
            label, file, sched = spec.split("=", 2)
            rows.append({"workload": label, "b": "-", "best_ugraph": Path(file).read_text(),
                         "schedule": sched})
    overrides = parse_fields(a.set)
    results = []
    for row in rows:
        try:
            res = probe_row(row, a.runs, overrides, [e for e in a.edits.split(",") if e])
        except Exception as e:  # a row that fails to build is reported, the others still run
            print(f"{row['workload']}:{row['b']}: {type(e).__name__}: {e}")
            continue
        results.append(res)
        print("\n".join(summarize(res)), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
