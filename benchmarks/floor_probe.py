"""What the timing method allows: read-only and copy kernels over the bytes of memory-bound
rows, timed exactly like the benchmarks (triton do_bench median, L2 flushed, CUDA graph).

Usage (device): python3 benchmarks/floor_probe.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> None:
    import torch
    from gpu_bench import bench, graphed

    for label, shape in (("rmsnorm W 4096x6144", (4096, 6144)), ("gated_mlp W1+W2", (2, 4096, 4096)),
                         ("empty", (8,))):
        w = (torch.rand(shape, device="cuda") - 0.5).half()
        out = torch.empty(1, device="cuda", dtype=torch.float32)

        def read(w: torch.Tensor = w, out: torch.Tensor = out) -> None:
            torch.sum(w, dtype=torch.float32, out=out[0])

        us = bench(graphed(read, []))
        gb = w.numel() * 2 / 1e9
        print(f"{label:24} read {gb * 1e3:7.1f} MB: {us:6.1f} us  ({gb / (us * 1e-6) / 1e3:.2f} TB/s "
              f"incl. launch)")


if __name__ == "__main__":
    main()
