"""cp.async/ldmatrix before/after on one GPU: for each μGraph, compile with the default
EmitOptions (cp.async + ldmatrix), the same with a 2-stage pipeline, with cp.async but scalar
fragment reads, and with the fp32
tiles of before (``async_copy=False, ldmatrix=False``); validate each against the float64
μGraph, then time them interleaved (``time_graph(graph=True)``: back-to-back CUDA-graph
launches, median microseconds; rounds alternate the option sets to share drift).

Usage: python3 benchmarks/cp_async_bench.py [--out DIR] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mirage_formal import workloads  # noqa: E402
from mirage_formal.codegen import EmitOptions, compile_graph  # noqa: E402
from mirage_formal.codegen.timing import time_graph  # noqa: E402
from mirage_formal.codegen.validate import validate  # noqa: E402
from mirage_formal.ir.serialize import load_ugraphs  # noqa: E402

OPTS = {"async+ldsm": EmitOptions(), "async+ldsm S2": EmitOptions(async_stages=2),
        "async": EmitOptions(ldmatrix=False),
        "fp32 tiles": EmitOptions(async_copy=False, ldmatrix=False)}
SEARCHED = ROOT / "benchmarks" / "results" / "search_workloads_ugraphs"


def graphs() -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = [
        ("rmsnorm hw b1", workloads.handwritten("rmsnorm", 1)),
        ("rmsnorm hw b8", workloads.handwritten("rmsnorm", 8)),
        ("gqa hw b1", workloads.handwritten("gqa", 1)),
        ("gqa hw b8", workloads.handwritten("gqa", 8)),
        ("gated_mlp prog", workloads.program("gated_mlp")),
        ("lora prog", workloads.program("lora")),
        ("ntrans prog b8", workloads.program("ntrans", 8)),
        ("mha prog b1", workloads.program("mha", 1)),
    ]
    for wl in ("gated_mlp", "rmsnorm", "gqa"):
        p = SEARCHED / wl / "ugraphs.json"
        if p.is_file():
            for i, g in enumerate(load_ugraphs(p)[:2]):
                out.append((f"{wl} searched #{i}", g))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    rows = []
    for name, g in graphs():
        row: dict[str, object] = {"name": name}
        cgs = {}
        for k, o in OPTS.items():
            try:
                cg = compile_graph(g, opts=o)  # type: ignore[arg-type]
                rep = validate(cg, trials=2)
                row[f"{k} ok"] = bool(rep.ok)
                row[f"{k} err"] = str(rep)[:200]
                row["path"] = row.get("path") or ("cp_async16" in cg.source and k != "fp32 tiles")
                if rep.ok:
                    cgs[k] = cg
            except Exception as e:
                row[f"{k} ok"] = False
                row[f"{k} err"] = f"{type(e).__name__}: {e}"[:300]
        times: dict[str, list[float]] = {k: [] for k in cgs}
        for _ in range(a.rounds):
            for k, cg in cgs.items():
                times[k].append(time_graph(cg, graph=True))
        for k, ts in times.items():
            row[f"{k} us"] = statistics.median(ts)
        rows.append(row)
        print(json.dumps(row), flush=True)
    hdr = f"| μGraph | path taken | {' | '.join(f'{k} (µs)' for k in OPTS)} | speedup |"
    lines = [hdr, "|" + "---|" * (len(OPTS) + 3)]
    for r in rows:
        cells = []
        for k in OPTS:
            cells.append(f"{r[f'{k} us']:.2f}" if f"{k} us" in r else ("FAIL" if not r.get(f"{k} ok") else "-"))
        sp = (f"{r['fp32 tiles us'] / r['async+ldsm us']:.2f}x"  # type: ignore[operator]
              if "fp32 tiles us" in r and "async+ldsm us" in r else "-")
        lines.append(f"| {r['name']} | {'yes' if r.get('path') else 'no'} | {' | '.join(cells)} | {sp} |")
    table = "\n".join(lines)
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "cp_async_bench.json").write_text(json.dumps(rows, indent=1))
        (Path(a.out) / "cp_async_bench.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
