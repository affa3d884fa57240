"""What the L2 flush between timed runs costs a memory-bound kernel: the same kernels timed
after a flush that *writes* 256 MB (triton do_bench's ``cache.zero_()``, what every table in
benchmarks/results uses) and after one that only *reads* 256 MB (the L2 then holds clean
lines, nothing to write back when the kernel's reads evict them).

Kernels: a read-only reduction over B bytes (``x.sum()``), a device copy of B bytes, the
rmsnorm and gated_mlp benchmark matmuls through cuBLAS (``X @ W``), and the fastest of a few
Triton streaming reads of the same weight bytes (each program sums ITERS x BLOCK fp16 values
with 16-byte loads into one partial: the read floor a fused kernel reading those weights could
reach under each flush; each also with Triton's L2 evict-first load policy, the policy of
our ``Schedule.evict_first``). Each: CUDA graph of the
kernel, median of 100 runs, flush before each, CUDA events around the kernel only.
``--small`` adds the floor of small programs (the attention and elementwise rows): an empty
kernel, and the fastest Triton streaming read of 0.25-32 MB (every configuration that divides
the size, with and without evict-first; the fastest of each size is printed).
Usage (device): python3 benchmarks/l2_flush_floor.py [--small] [--out FILE.json]; prints a table.
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
    ap.add_argument("--small", action="store_true", help="floors of small reads (0.25-32 MB)")
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
    import triton
    import triton.language as tl

    @triton.jit
    def stream_sum(x_ptr, out_ptr, BLOCK: tl.constexpr, ITERS: tl.constexpr,
                   EVICT: tl.constexpr):
        # (Triton reads the annotations: only tl.constexpr may appear there)
        pid = tl.program_id(0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        base = pid * BLOCK * ITERS
        for i in range(ITERS):
            acc += tl.load(x_ptr + base + i * BLOCK + tl.arange(0, BLOCK),
                           eviction_policy=EVICT).to(tl.float32)
        tl.store(out_ptr + pid, tl.sum(acc))

    def streaming(w: Any) -> dict[str, Any]:
        """Each configuration as a case; the caller keeps the fastest."""
        flat = w.reshape(-1)
        out = {}
        for block, iters, warps in ((1024, 1, 4), (4096, 1, 4), (4096, 4, 8), (4096, 16, 8),
                                    (8192, 8, 16)):
            if flat.numel() % (block * iters):
                continue
            grid = (flat.numel() // (block * iters),)
            part = torch.empty(grid, device=dev, dtype=torch.float32)
            for evict in ("", "evict_first"):
                tag = f"{block}x{iters},{warps}w" + (",L2 evict_first" if evict else "")
                out[tag] = (lambda f=flat, p=part, g=grid, b=block, i=iters, nw=warps, e=evict:
                            stream_sum[g](f, p, BLOCK=b, ITERS=i, EVICT=e, num_warps=nw))
        return out

    for label, w in (("rmsnorm W 50 MB", W), ("gated_mlp W1|W2 67 MB", W12)):
        for cfg, fn in streaming(w).items():
            cases[f"streaming read {label} (Triton {cfg})"] = (fn, w.numel() * 2)
    if args.small:
        empty_out = torch.empty(1, device=dev, dtype=torch.float32)

        @triton.jit
        def empty(out_ptr):
            pass

        cases["empty kernel"] = (lambda: empty[(1,)](empty_out), 0)
        for mb in (0.25, 1, 2, 4, 8, 16, 32):
            w = torch.randn(int(mb * 1024 * 1024) // 2, device=dev, dtype=torch.float16)
            for cfg, fn in streaming(w).items():
                cases[f"small read {mb} MB (Triton {cfg})"] = (fn, w.numel() * 2)
    rows = []
    for name, (fn, nbytes) in cases.items():
        g = graphed(fn)
        tw = timed(g, flush_write)
        tr = timed(g, flush_read)
        rows.append({"kernel": name, "bytes": nbytes, "us_after_write_flush": tw,
                     "us_after_read_flush": tr, "tbps_write_flush": nbytes / tw / 1e6,
                     "tbps_read_flush": nbytes / tr / 1e6})
    if args.small:  # the fastest configuration of each small size
        best: dict[str, dict[str, Any]] = {}
        for r in rows:
            if r["kernel"].startswith("small read"):
                size = r["kernel"].split(" (")[0]
                if size not in best or r["us_after_write_flush"] < best[size]["us_after_write_flush"]:
                    best[size] = r
        rows = [r for r in rows if not r["kernel"].startswith("small read")] + list(best.values())
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
