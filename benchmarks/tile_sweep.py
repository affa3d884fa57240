"""Tile-shape sweep: which block tiles (and so which μGraph grids) the tuned kernels like.

Builds the one-kernel fused μGraphs of rmsnorm (X·W / rms(X)) and gated_mlp
(silu(X·W1) ⊙ X·W2) for several column tiles and loop tiles, tunes each with the autotuner
(split, threads, gemv, ring depth) and prints the measured time. The search's grid choices
and the cost model should prefer what wins here.

Usage (device): PYTHONPATH=/tmp/site:. python3 benchmarks/tile_sweep.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mirage_formal import Graph, workloads  # noqa: E402
from mirage_formal.codegen.autotune import TuningCache, tune  # noqa: E402
from mirage_formal.ir.graph import KernelGraph  # noqa: E402


def gated_fused(col: int, k_tile: int, m: int = 8, k: int = 4096, n: int = 4096) -> KernelGraph:
    g = Graph()
    X = g.input((m, k), "f16", "X")
    W1 = g.input((k, n), "f16", "W1")
    W2 = g.input((k, n), "f16", "W2")
    kk = g.kernel([X, W1, W2], grid=(n // col, 1, 1), threads=128, forloop=k // k_tile)
    xt = kk.iter(X, imap=(-1, -1, -1), fmap=1)
    w1 = kk.iter(W1, imap=(1, -1, -1), fmap=0)
    w2 = kk.iter(W2, imap=(1, -1, -1), fmap=0)
    a = kk.accum(kk.matmul(xt, w1))
    b = kk.accum(kk.matmul(xt, w2))
    kk.output(kk.mul(kk.silu(a), b), omap=(1, -1, -1))
    (y,) = kk.build()
    g.output(y)
    return g.build()


def variants() -> list[tuple[str, int, str, KernelGraph, KernelGraph]]:
    out = []
    for b in (1, 8):
        prog = workloads.program("rmsnorm", b)
        for col in (64, 128, 256):
            for kt in (64, 128):
                out.append(("rmsnorm", b, f"col{col},k{kt}", prog,
                            workloads.rmsnorm_fused(b, col_tile=col, k_tile=kt)))
    prog = workloads.program("gated_mlp", 1)
    for col in (32, 64, 128):
        for kt in (32, 64):
            out.append(("gated_mlp", 1, f"col{col},k{kt}", prog, gated_fused(col, kt)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tile_sweep_out")
    ap.add_argument("--jobs", type=int, default=15)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = TuningCache(out / "tuning")
    rows: list[dict[str, Any]] = []
    for name, b, label, prog, g in variants():
        row: dict[str, Any] = {"workload": name, "b": b, "tiles": label}
        try:
            t = tune(g, prog, jobs=args.jobs, cache=cache)
            if t is not None:
                row.update(default_us=t.default_us, tuned_us=t.us, schedule=t.describe())
        except Exception as e:  # keep the sweep going
            row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    (out / "tile_sweep.json").write_text(json.dumps(rows, indent=1) + "\n")
    for r in rows:
        print(f"{r['workload']:10} b={r['b']} {r['tiles']:14} opening {r.get('default_us') or 0:7.1f} "
              f"tuned {r.get('tuned_us') or 0:7.1f}  {r.get('schedule', r.get('error', ''))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
