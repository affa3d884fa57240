"""Would warpgroup MMA (``wgmma``) bring the fused rmsnorm kernel closer to its pure weight read?
(device only; a probe, not a product measurement)

rmsnorm's fused TMA ring kernel (the table's b=8 winner) spends about 0.45 µs above a pure
read of its weights through the same ring (s29 c7, c8): its four consumer warps load
fragments with ``ldmatrix`` and run ``mma.sync`` (32 fragment loads and 64 products a stage),
and square X for the fold. This hand-written kernel keeps the producer warp and the ring, and
gives the consumers one warpgroup instruction per 16-row k-step instead: ``wgmma.mma_async``
m64n64k16 reads X (A, K-major) and W (B, N-major, transposed) straight from the swizzled
boxes the copy engine wrote, through shared-memory descriptors (rows 16-63 of A are padding
whose products are dropped). While the products run, each consumer thread squares one
16-byte chunk of X per box for the fold. It needs the sm_90a target.

A descriptor's leading/stride byte offsets for an N-major (transposed) B are easy to get
wrong, so the probe builds a few variants (B's offsets swapped, B not transposed) and
validates each against float64 on the host before timing the ones that compute the product.
Everything is timed like the table times a kernel (CUDA graph, 256 MB flush before each of 100
runs, median), beside the table's rmsnorm winners, on the same arrays (three allocations, two
rounds each; one kernel's time moves by up to 0.35 µs with where its inputs lie, s29).

Usage (device): PYTHONPATH=. python3 benchmarks/wgmma_probe.py [--rounds 2] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

K, N = 4096, 6144
#: ring stages of 128 rows (the winner's)
STAGES = 4
#: bytes of dynamic shared memory: the X stages (two 16 x 64 boxes each), 8 KB that keeps the
#: padding rows wgmma reads past the last X stage inside the allocation, the W stages (one
#: 128 x 64 box each), and 1 KB to align the start to the swizzle's 1024-byte period
SMEM = STAGES * 4096 + 8192 + STAGES * 16384 + 1024

HEAD = r"""
#include <cuda_fp16.h>
typedef unsigned long long u64;
struct __align__(64) TMap { u64 v[16]; };
__device__ __forceinline__ unsigned sa(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ u64 pol_first() {
  u64 p; asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ void mbar_wait(unsigned b, unsigned phase) {
  asm volatile("{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}"
               :: "r"(b), "r"(phase) : "memory");
}
__device__ __forceinline__ void tma2d(unsigned dst, const void* map, int x, int y, unsigned bar, u64 pol) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
               " [%0], [%1, {%2, %3}], [%4], %5;"
               :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar), "l"(pol) : "memory");
}
// a shared-memory matrix descriptor: start, leading and stride byte offsets (16-byte units),
// the 128-byte swizzle
__device__ __forceinline__ u64 desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)lbo << 16) | ((u64)sbo << 32) | (1ull << 62);
}
"""

KERNEL = r"""
extern "C" __global__ void __launch_bounds__(160, 1)
{name}(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {{
  constexpr int R = 128, S = {S}, IT = {K} / R;
  constexpr int XB = 16 * 128, XSTAGE = 2 * XB, WSTAGE = R * 128, XPAD = 8192;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  unsigned char* xs = sm;
  unsigned char* ws = sm + S * XSTAGE + XPAD;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {{
    for (int s = 0; s < S; ++s) {{
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&full[s])), "r"(1));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(4));
    }}
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }}
  __syncthreads();
  if (warp == 4) {{  // the producer: every copy of the ring
    if (lane == 0) {{
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {{
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(WSTAGE + XSTAGE) : "memory");
        tma2d(sa(ws + s * WSTAGE), &tw, c0, it * R, fb, pol);
        tma2d(sa(xs + s * XSTAGE), &tx, it * R, 0, fb, pol);
        tma2d(sa(xs + s * XSTAGE + XB), &tx, it * R + 64, 0, fb, pol);
        if (++s == S) {{ s = 0; ph ^= 1; }}
      }}
    }}
    return;
  }}
  float d[32];
  #pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  float ssq = 0.f;
  const int frow = threadIdx.x / 8, fc = threadIdx.x % 8;  // the fold's row and 16-byte chunk
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {{
    mbar_wait(sa(&full[s]), ph);
    const unsigned xa = sa(xs + s * XSTAGE), wa = sa(ws + s * WSTAGE);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    #pragma unroll
    for (int ks = 0; ks < R / 16; ++ks) {{
      const u64 da = desc(xa + (ks / 4) * XB + (ks % 4) * 32, 1, 64);
      const u64 db = desc(wa + ks * 2048, {LBO_B}, {SBO_B});
      asm volatile("{{\n .reg .pred p;\n setp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}}, "
        "%32, %33, p, 1, 1, 0, {TRANS_B};\n}}"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db));
    }}
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    #pragma unroll
    for (int b = 0; b < 2; ++b) {{  // the fold, while the products run
      unsigned v0, v1, v2, v3;
      asm volatile("ld.shared.v4.u32 {{%0,%1,%2,%3}}, [%4];" : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3)
                   : "r"(xa + b * XB + frow * 128 + ((fc ^ (frow & 7)) << 4)));
      const unsigned vs[4] = {{v0, v1, v2, v3}};
      #pragma unroll
      for (int e = 0; e < 4; ++e) {{
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&vs[e]));
        ssq += f.x * f.x + f.y * f.y;
      }}
    }}
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) {{ s = 0; ph ^= 1; }}
  }}
  ssq += __shfl_xor_sync(0xffffffffu, ssq, 1);
  ssq += __shfl_xor_sync(0xffffffffu, ssq, 2);
  ssq += __shfl_xor_sync(0xffffffffu, ssq, 4);
  if (fc == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, 128;" ::: "memory");
  if (warp == 0) {{  // rows 0-15 of the 64 the warpgroup computed are X's
    #pragma unroll
    for (int h = 0; h < 2; ++h) {{
      const int row = lane / 4 + 8 * h;
      if (row < mrows) {{
        const float inv = 1.f / sqrtf(ss_sh[row] / {K}.f);
        #pragma unroll
        for (int i = 0; i < 8; ++i) {{
          const int col = c0 + 8 * i + 2 * (lane % 4);
          *reinterpret_cast<__half2*>(out + (size_t)row * {N} + col) =
              __floats2half2_rn(d[4 * i + 2 * h] * inv, d[4 * i + 2 * h + 1] * inv);
        }}
      }}
    }}
  }}
}}
"""

#: name -> (B's leading and stride byte offsets in 16-byte units, B transposed): B is N-major
#: in the ring (each 128-byte row one k, 64 n), 8-row groups of k 1024 bytes apart
VARIANTS: dict[str, tuple[int, int, int]] = {
    "wgmma": (1, 64, 1),
    "wgmma, B offsets swapped": (64, 1, 1),
}
# (s30 c1: a third variant, B not transposed (1, 64, 0), faulted with an illegal address and
# took the context down, so it is no longer built; the swapped one stays as a negative control
# that validation must reject.)


def source() -> str:
    """Every variant's kernel, one compilation unit (sm_90a)."""
    return HEAD + "\n".join(
        KERNEL.format(name=f"wg_{i}", S=STAGES, K=K, N=N, LBO_B=lbo, SBO_B=sbo, TRANS_B=tb)
        for i, (lbo, sbo, tb) in enumerate(VARIANTS.values()))


def main() -> None:
    import numpy as np
    from retime_winners import winner
    from stream_probe import tensor_map

    from mirage_formal.codegen import compile_graph
    from mirage_formal.codegen.nvrtc import compile_cubin
    from mirage_formal.codegen.runtime import DeviceArray, runtime
    from mirage_formal.codegen.timing import device_inputs, time_launch, time_like_baselines
    from mirage_formal.ir.dtypes import DType

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    rt = runtime()
    stream = rt.stream()
    mod = rt.load(compile_cubin(source(), "sm_90a", name="wgmma_probe.cu"))
    fns = {name: rt.function(mod, f"wg_{i}", SMEM) for i, name in enumerate(VARIANTS)}
    table = {f"{r['workload']}:{r['b']}": r
             for r in json.loads((ROOT / "benchmarks/results/gpu_optimize_latest.json").read_text())}

    def probe_launch(f: Any, x: Any, w: Any, o: Any, m: int) -> Callable[[], None]:
        tw = tensor_map(w.ptr, K, N, 64, 128, 3)
        tx = tensor_map(x.ptr, m, K, 64, 16, 3)  # 16-row boxes: rows past m are zero-filled
        outp, mr = ctypes.c_void_p(o.ptr), ctypes.c_int(m)
        params = (ctypes.c_void_p * 4)(tw[1], tx[1], ctypes.addressof(outp), ctypes.addressof(mr))

        def run() -> None:
            _ = (tw, tx, outp, mr)  # (alive as long as the launch)
            rt.ck(rt.drv.cuLaunchKernel(f, N // 64, 1, 1, 160, 1, 1, SMEM, stream,
                                        ctypes.addressof(params), 0), "cuLaunchKernel")
        return run

    results: dict[str, Any] = {}
    for b, m in ((8, 16), (1, 2)):
        g, sched = winner(table[f"rmsnorm:{b}"])
        cg = compile_graph(g, schedules=sched)
        valid: dict[str, bool] = {}
        times: dict[str, list[float]] = {"table winner": []}
        for seed in (3, 4, 5):
            x, w = device_inputs(cg, seed=seed)
            o = DeviceArray((m, N), DType.F16, rt)
            if seed == 3:  # validate each variant once, against float64
                xh = x.numpy().astype(np.float64)
                wh = w.numpy().astype(np.float64)
                ref = (xh @ wh) / np.sqrt((xh ** 2).mean(axis=1, keepdims=True))
                for name, f in fns.items():
                    probe_launch(f, x, w, o, m)()
                    rt.ck(rt.drv.cuStreamSynchronize(stream), "cuStreamSynchronize")
                    got = o.numpy().astype(np.float64)
                    err = float(np.max(np.abs(got - ref)) / max(1e-9, float(np.max(np.abs(ref)))))
                    valid[name] = bool(np.isfinite(err) and err < 2e-2)
                    print(f"b={b} {name}: max error / max |ref| = {err:.3g}", flush=True)
                    if valid[name]:
                        times[name] = []
            for _ in range(a.rounds):
                times["table winner"].append(round(time_like_baselines(cg, inputs=[x, w]), 2))
                for name in (n for n in fns if valid.get(n)):
                    times[name].append(round(time_launch(rt, stream, probe_launch(fns[name], x, w, o, m)), 2))
        results[f"b={b}"] = {"valid": valid, "us": times}
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))
    print("\n| batch | kernel | median µs | each allocation's best |")
    print("|---|---|---|---|")
    for key, r in results.items():
        for name, t in r["us"].items():
            per = [min(t[i:i + a.rounds]) for i in range(0, len(t), a.rounds)]
            print(f"| {key} | {name} | {statistics.median(t):.2f} | {per} |")


if __name__ == "__main__":
    main()
