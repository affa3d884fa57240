"""What the L2 flush between timed runs costs a memory-bound kernel: the same kernels timed
after a flush that *writes* 256 MB (triton do_bench's ``cache.zero_()``, what every table in
benchmarks/results uses) and after one that only *reads* 256 MB (the L2 then holds clean
lines, nothing to write back when the kernel's reads evict them).

Kernels: a read-only reduction over B bytes (``x.sum()``), a device copy of B bytes, and the
rmsnorm and gated_mlp benchmark matmuls through cuBLAS (``X @ W``). Each: CUDA graph of the
kernel, median of 100 runs, flush before each, CUDA events around the kernel only.
Usage (device): python3 benchmarks/l2_flush_floor.py [--out FILE.json]; prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    args = ap.parse_args()
    dev = torch.device("cuda")
    flush_buf = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device=dev)
    sink = torch.empty((), dtype=torch.int64, device=dev)

    def flush_write() -> None:
        flush_buf.zero_()

    def flush_read() -> None:
        sink.copy_(flush_buf.sum())

    def graphed(fn: Any) -> Any:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        return g.replay

    def timed(fn: Any, flush: Any, reps: int = 100) -> float:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for _ in range(5):
            flush()
            fn()
        for i in range(reps):
            flush()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)) * 1e3

    n = 50 * 1024 * 1024 // 2
    x = torch.randn(n, device=dev, dtype=torch.float16)
    y = torch.empty_like(x)
    out = torch.empty((), device=dev, dtype=torch.float32)
    X2 = torch.randn(2, 4096, device=dev, dtype=torch.float16)
    W = torch.randn(4096, 6144, device=dev, dtype=torch.float16)
    X8 = torch.randn(8, 4096, device=dev, dtype=torch.float16)
    W12 = torch.randn(4096, 8192, device=dev, dtype=torch.float16)
    cases = {
        "sum 50 MB (read)": (lambda: out.copy_(x.sum(dtype=torch.float32)), 2 * n),
        "copy 50 MB (read+write)": (lambda: y.copy_(x), 4 * n),
        "rmsnorm X@W 2x4096x6144 (cuBLAS)": (lambda: X2 @ W, W.numel() * 2),
        "gated_mlp X@[W1|W2] 8x4096x8192 (cuBLAS)": (lambda: X8 @ W12, W12.numel() * 2),
    }
    rows = []
    for name, (fn, nbytes) in cases.items():
        g = graphed(fn)
        tw = timed(g, flush_write)
        tr = timed(g, flush_read)
        rows.append({"kernel": name, "bytes": nbytes, "us_after_write_flush": tw,
                     "us_after_read_flush": tr, "tbps_write_flush": nbytes / tw / 1e6,
                     "tbps_read_flush": nbytes / tr / 1e6})
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cuda": torch.version.cuda}
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"env": env, "rows": rows}, f, indent=1)
    print(env)
    print("| kernel | MB | µs (write flush) | TB/s | µs (read flush) | TB/s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['kernel']} | {r['bytes'] / 1e6:.1f} | {r['us_after_write_flush']:.1f} | "
              f"{r['tbps_write_flush']:.2f} | {r['us_after_read_flush']:.1f} | {r['tbps_read_flush']:.2f} |")


if __name__ == "__main__":
    main()
