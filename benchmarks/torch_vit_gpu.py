"""A ViT-style encoder block (``examples/vit_block.py``) through the PyTorch backend, against
eager and torch.compile, timed like the decoder benchmark (``torch_decoder_gpu.py``: triton
do_bench median of a CUDA graph of one call, L2 flushed; ``--device cpu``: a smoke run of plain
calls).

    PYTHONPATH=. python3 benchmarks/torch_vit_gpu.py --out DIR [--batch 1 8] [--tokens 197]
        [--budget 40] [--shape vit_base|tiny] [--device cuda|cpu]

Writes DIR/torch_vit.json (every variant's time and error against float64, every region's
program, kernels and times) and prints a table. Imports torch, the package and the decoder
benchmark's helpers.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "examples"))

import torch  # noqa: E402
from torch_decoder_gpu import environment, region_rows, time_variant  # noqa: E402
from vit_block import TINY, BlockShape, EncoderBlock, block_inputs  # noqa: E402

import mirage_formal as mf  # noqa: E402

SHAPES = {"vit_base": BlockShape(), "tiny": TINY}
DTYPE = {"cuda": torch.float16, "cpu": torch.float32}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--batch", type=int, nargs="+", default=[1])
    ap.add_argument("--tokens", type=int, default=197)
    ap.add_argument("--budget", type=float, default=40.0)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="vit_base")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    shape, dtype = SHAPES[a.shape], DTYPE[a.device]
    doc: dict[str, Any] = {"environment": environment(" ".join(sys.argv)), "shape": shape.__dict__,
                           "tokens": a.tokens, "budget_s": a.budget, "batches": []}
    lines = ["| batch | variant | µs | rel. error vs float64 |", "|---|---|---|---|"]
    for batch in a.batch:
        torch.manual_seed(0)
        block = EncoderBlock(shape).to(a.device, dtype).eval()
        args = block_inputs(batch, a.tokens, shape, dtype, a.device)
        with torch.no_grad():
            refs = (copy.deepcopy(block).double()(args[0].double()),)
        entry: dict[str, Any] = {"batch": batch, "variants": []}
        doc["batches"].append(entry)
        variants: list[tuple[str, Any]] = [
            ("eager", block), ("torch.compile (inductor)", torch.compile(block, dynamic=False))]
        for name, fn in variants:
            entry["variants"].append(time_variant(name, lambda x, f=fn: (f(x),), args, refs))
            torch._dynamo.reset()
        t = time.perf_counter()
        fast = mf.compile(block, budget_s=a.budget)
        with torch.no_grad():
            fast(*args)
        entry["compile_s"] = time.perf_counter() - t
        entry["regions"] = region_rows(fast)
        entry["variants"].append(
            time_variant('backend="mirage_formal"', lambda x, f=fast: (f(x),), args, refs))
        torch._dynamo.reset()
        for v in entry["variants"]:
            us = v.get("us_graph", v.get("us_cpu_calls"))
            err = ", ".join(f"{e:.1e}" for e in v.get("rel_error_vs_float64", []))
            lines.append(f"| {batch} | {v['variant']} | {us if us is None else round(us, 1)} | {err} |")
        (a.out / "torch_vit.json").write_text(json.dumps(doc, indent=1) + "\n")
    print("\n".join(lines))
    for entry in doc["batches"]:
        for r in entry["regions"]:
            print(f"b={entry['batch']} {r['region']}: {' '.join(r['program_ops'] or [])} -> "
                  f"{r['runs_on']} ({r['ugraph_kernels']} kernels; kernel {r['kernel_us']} µs, "
                  f"torch {r['torch_us']} µs) {r['reason'][:100]}")


if __name__ == "__main__":
    main()
