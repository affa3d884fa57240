"""How fast can a kernel stream a weight matrix under the benchmark's timing, and which way of
reading it gets there (device only; a probe, not a product measurement).

The memory-bound rows (rmsnorm: W 4096 x 6144 fp16, 50 MB; gated_mlp: W1 and W2 4096 x 4096,
67 MB) spend their time reading weights. This script times kernels that only read such a
matrix (each thread sums what it read into one float it stores, so nothing is optimized
away) under the method every table uses: a CUDA graph of one launch, 256 MB memset before
each of 100 runs, CUDA events around the launch, median. The ways of reading:

- ``contig``: each block reads T*U contiguous 16-byte vectors (a plain streaming read, the
  shape of Triton's fastest read floor in ``l2_flush_floor.py``).
- ``band``: block (b, s) reads column band b (C columns, C*2 bytes of each row) over the
  rows of K-slice s, with 16-byte loads straight to registers, U loads in flight per thread
  (the pattern of a gemv kernel whose blocks own output columns, split over K).
- ``ring``: the same bands through a ``cp.async`` ring of S stages of R rows in shared
  memory, one block per SM (the pattern of our emitted kernels).
- ``ring2``: as ``ring`` but each stage holds R rows of two matrices (gated_mlp's W1 and W2,
  which the emitted kernel reads in one iteration), in one allocation or two, optionally
  with padded shared-memory rows (``PAD``) and the split's blocks interleaved in grid x.
- ``bulk``: the same bands through bulk copies (``cp.async.bulk``, one per row piece, an
  mbarrier per stage), issued by one warp.
- ``tma``: the same bands through 2D tensor-map copies (``cp.async.bulk.tensor.2d``): one
  instruction, issued by one thread, moves a box of 64 columns x R rows (the tensor map is a
  ``__grid_constant__`` kernel parameter built on the host with ``cuTensorMapEncodeTiled``),
  with or without the 128-byte swizzle (``SWZ``).

Every variant with the L2 evict-first policy (``pol``) as our kernels use it, some without.
The table winners of rmsnorm b=1 and gated_mlp are timed in the same run for reference.
Usage (device): python3 benchmarks/stream_probe.py [--out FILE.json] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

HEAD = r"""
#include <cuda_fp16.h>
typedef unsigned long long u64;
struct __align__(64) TMap { u64 v[16]; };  // a CUtensorMap's 128 opaque bytes
__device__ __forceinline__ u64 pol_first() {
  u64 p; asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ uint4 ldv(const void* p, u64 pol, bool use_pol) {
  uint4 v;
  if (use_pol)
    asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(pol));
  else
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ float hsum(uint4 v) {
  const __half2* h = reinterpret_cast<const __half2*>(&v);
  float2 a = __half22float2(h[0]), b = __half22float2(h[1]), c = __half22float2(h[2]), d = __half22float2(h[3]);
  return ((a.x + a.y) + (b.x + b.y)) + ((c.x + c.y) + (d.x + d.y));
}
__device__ __forceinline__ void cp16(void* s, const void* g, u64 pol, bool use_pol) {
  unsigned d = (unsigned)__cvta_generic_to_shared(s);
  if (use_pol) asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" :: "r"(d), "l"(g), "l"(pol) : "memory");
  else asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(g) : "memory");
}
"""

CONTIG = r"""
extern "C" __global__ void __launch_bounds__({T}) {name}(const uint4* __restrict__ w, float* out) {{
  const u64 pol = pol_first();
  const size_t base = (size_t)blockIdx.x * {T} * {U} + threadIdx.x;
  uint4 v[{U}];
  #pragma unroll
  for (int u = 0; u < {U}; ++u) v[u] = ldv(w + base + u * {T}, pol, {POL});
  float acc = 0.f;
  #pragma unroll
  for (int u = 0; u < {U}; ++u) acc += hsum(v[u]);
  out[blockIdx.x * {T} + threadIdx.x] = acc;
}}
"""

BAND = r"""
extern "C" __global__ void __launch_bounds__({T}) {name}(const half* __restrict__ w, float* out) {{
  constexpr int VPR = {C} / 8, RPS = {T} / VPR, ROWS = {K} / {KS};
  const u64 pol = pol_first();
  const int v = threadIdx.x % VPR, r = threadIdx.x / VPR;
  const int k0 = blockIdx.y * ROWS;
  const char* base = reinterpret_cast<const char*>(w + (size_t)k0 * {N} + blockIdx.x * {C} + v * 8);
  float acc = 0.f;
  for (int k = r; k < ROWS; k += RPS * {U}) {{
    uint4 x[{U}];
    #pragma unroll
    for (int u = 0; u < {U}; ++u) x[u] = ldv(base + (size_t)(k + u * RPS) * {N} * 2, pol, {POL});
    #pragma unroll
    for (int u = 0; u < {U}; ++u) acc += hsum(x[u]);
  }}
  out[(blockIdx.y * gridDim.x + blockIdx.x) * {T} + threadIdx.x] = acc;
}}
"""

#: the cp.async ring's prologue and the head of its loop (issue, commit, wait, barrier), shared
#: by the ``ring`` kernels; each template defines ``issue(it)`` before it
RING_PIPELINE = r"""
  #pragma unroll
  for (int s = 0; s < {S} - 1; ++s) {{ if (s < IT) issue(s); asm volatile("cp.async.commit_group;"); }}
  float acc = 0.f;
  for (int it = 0; it < IT; ++it) {{
    if (it + {S} - 1 < IT) issue(it + {S} - 1);
    asm volatile("cp.async.commit_group;");
    asm volatile("cp.async.wait_group %0;" :: "n"({S} - 1));
    __syncthreads();
"""

RING = r"""
extern "C" __global__ void __launch_bounds__({T}) {name}(const half* __restrict__ w, float* out) {{
  constexpr int VPR = {C} / 8, STAGE = {R} * VPR, PER = STAGE / {T}, ROWS = {K} / {KS}, IT = ROWS / {R};
  extern __shared__ __align__(16) uint4 sm[];
  const u64 pol = pol_first();
  const int k0 = blockIdx.y * ROWS;
  const half* base = w + (size_t)k0 * {N} + blockIdx.x * {C};
  auto issue = [&](int it) {{
    #pragma unroll
    for (int p = 0; p < PER; ++p) {{
      const int i = threadIdx.x + p * {T}, row = i / VPR, col = i % VPR;
      cp16(sm + (it % {S}) * STAGE + i, base + (size_t)(it * {R} + row) * {N} + col * 8, pol, {POL});
    }}
  }};
""" + RING_PIPELINE + r"""    #pragma unroll
    for (int p = 0; p < PER; ++p) acc += hsum(sm[(it % {S}) * STAGE + threadIdx.x + p * {T}]);
    __syncthreads();
  }}
  out[(blockIdx.y * gridDim.x + blockIdx.x) * {T} + threadIdx.x] = acc;
}}
"""

#: the mbarrier ring's prologue, loop and end (wait for stage it's bytes, sum them), shared by
#: the ``bulk`` and ``tma`` kernels; each defines ``issue(it)`` (one arrive.expect_tx and its
#: copies per stage) before it
MBARRIER_LOOP = r"""  #pragma unroll
  for (int s = 0; s < {S} - 1; ++s) if (s < IT) issue(s);
  float acc = 0.f;
  for (int it = 0; it < IT; ++it) {{
    if (it + {S} - 1 < IT) issue(it + {S} - 1);
    const unsigned b = (unsigned)__cvta_generic_to_shared(&bar[it % {S}]);
    const unsigned phase = (it / {S}) & 1;
    asm volatile("{{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared.b64 p, [%0], %1;\n @!p bra W;\n}}"
                 :: "r"(b), "r"(phase) : "memory");
    #pragma unroll
    for (int p = 0; p < PER; ++p) acc += hsum(sm[(it % {S}) * STAGE + threadIdx.x + p * {T}]);
    __syncthreads();
  }}
  out[(blockIdx.y * gridDim.x + blockIdx.x) * {T} + threadIdx.x] = acc;
}}
"""

BULK = r"""
extern "C" __global__ void __launch_bounds__({T}) {name}(const half* __restrict__ w, float* out) {{
  constexpr int VPR = {C} / 8, STAGE = {R} * VPR, PER = STAGE / {T}, ROWS = {K} / {KS}, IT = ROWS / {R};
  constexpr unsigned BYTES = {R} * {C} * 2;
  extern __shared__ __align__(128) uint4 sm[];
  __shared__ __align__(8) u64 bar[{S}];
  const u64 pol = pol_first();
  const int k0 = blockIdx.y * ROWS;
  const half* base = w + (size_t)k0 * {N} + blockIdx.x * {C};
  if (threadIdx.x == 0) {{
    for (int s = 0; s < {S}; ++s)
      asm volatile("mbarrier.init.shared.b64 [%0], 1;" :: "r"((unsigned)__cvta_generic_to_shared(&bar[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }}
  __syncthreads();
  auto issue = [&](int it) {{
    if (threadIdx.x < 32) {{
      const unsigned b = (unsigned)__cvta_generic_to_shared(&bar[it % {S}]);
      if (threadIdx.x == 0)
        asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" :: "r"(b), "r"(BYTES) : "memory");
      __syncwarp();
      for (int row = threadIdx.x; row < {R}; row += 32) {{
        const unsigned d = (unsigned)__cvta_generic_to_shared(sm + (it % {S}) * STAGE + row * VPR);
        const half* g = base + (size_t)(it * {R} + row) * {N};
        if ({POL})
          asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
                       :: "r"(d), "l"(g), "r"({C} * 2), "r"(b), "l"(pol) : "memory");
        else
          asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                       :: "r"(d), "l"(g), "r"({C} * 2), "r"(b) : "memory");
      }}
    }}
  }};
""" + MBARRIER_LOOP

TMA = r"""
extern "C" __global__ void __launch_bounds__({T}) {name}(const __grid_constant__ TMap tmap, float* out) {{
  constexpr int BOXES = {C} / 64, STAGE = {R} * {C} / 8, PER = STAGE / {T}, ROWS = {K} / {KS}, IT = ROWS / {R};
  constexpr unsigned BYTES = {R} * {C} * 2;
  extern __shared__ __align__(16) uint4 sm_raw[];
  __shared__ __align__(8) u64 bar[{S}];
  // the 128-byte swizzle needs 1024-byte aligned boxes: the launch gives 1024 bytes to spare
  uint4* sm = sm_raw + ((1024 - ((unsigned)__cvta_generic_to_shared(sm_raw) & 1023)) & 1023) / 16;
  const u64 pol = pol_first();
  const int k0 = blockIdx.y * ROWS, c0 = blockIdx.x * {C};
  if (threadIdx.x == 0) {{
    asm volatile("prefetch.tensormap [%0];" :: "l"(&tmap) : "memory");
    for (int s = 0; s < {S}; ++s)
      asm volatile("mbarrier.init.shared.b64 [%0], 1;" :: "r"((unsigned)__cvta_generic_to_shared(&bar[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }}
  __syncthreads();
  auto issue = [&](int it) {{
    if (threadIdx.x == 0) {{
      const unsigned b = (unsigned)__cvta_generic_to_shared(&bar[it % {S}]);
      asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" :: "r"(b), "r"(BYTES) : "memory");
      #pragma unroll
      for (int c = 0; c < BOXES; ++c) {{
        const unsigned d = (unsigned)__cvta_generic_to_shared(sm + (it % {S}) * STAGE + c * {R} * 8);
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {{%2, %3}}], [%4], %5;"
                     :: "r"(d), "l"(&tmap), "r"(c0 + c * 64), "r"(k0 + it * {R}), "r"(b), "l"(pol) : "memory");
      }}
    }}
  }};
""" + MBARRIER_LOOP

RING2 = r"""
extern "C" __global__ void __launch_bounds__({T}) {name}(const half* __restrict__ w, float* out, const half* __restrict__ w2) {{
  constexpr int VPR = {C} / 8, PITCH = VPR + {PAD}, HALF = {R} * PITCH, STAGE = 2 * HALF, PER = {R} * VPR / {T};
  constexpr int ROWS = {K} / 2 / {KS}, IT = ROWS / {R};
  extern __shared__ __align__(16) uint4 sm[];
  const u64 pol = pol_first();
  const int band = {INTERLEAVE} ? blockIdx.x / {KS} : blockIdx.x, ks = {INTERLEAVE} ? blockIdx.x % {KS} : blockIdx.y;
  const int k0 = ks * ROWS;
  const half* b1 = w + (size_t)k0 * {N} + band * {C};
  const half* b2 = w2 + (size_t)k0 * {N} + band * {C};
  auto issue = [&](int it) {{
    #pragma unroll
    for (int p = 0; p < PER; ++p) {{
      const int i = threadIdx.x + p * {T}, row = i / VPR, col = i % VPR;
      cp16(sm + (it % {S}) * STAGE + row * PITCH + col, b2 + (size_t)(it * {R} + row) * {N} + col * 8, pol, {POL});
    }}
    #pragma unroll
    for (int p = 0; p < PER; ++p) {{
      const int i = threadIdx.x + p * {T}, row = i / VPR, col = i % VPR;
      cp16(sm + (it % {S}) * STAGE + HALF + row * PITCH + col, b1 + (size_t)(it * {R} + row) * {N} + col * 8, pol, {POL});
    }}
  }};
""" + RING_PIPELINE + r"""    #pragma unroll
    for (int p = 0; p < PER; ++p) {{
      const int i = threadIdx.x + p * {T};
      acc += hsum(sm[(it % {S}) * STAGE + (i / VPR) * PITCH + i % VPR]) + hsum(sm[(it % {S}) * STAGE + HALF + (i / VPR) * PITCH + i % VPR]);
    }}
    __syncthreads();
  }}
  out[blockIdx.x * {T} + threadIdx.x] = acc;
}}
"""

#: (label, K rows, N columns): the weights of the two rows
SHAPES = [("rmsnorm W", 4096, 6144), ("gated_mlp W1|W2", 8192, 4096)]


def variants(k: int, n: int, quick: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    vecs = k * n // 8
    for t, u in ((128, 4), (256, 4), (256, 8)):
        for pol in (1, 0):
            if vecs % (t * u) == 0:
                out.append(dict(kind="contig", T=t, U=u, POL=pol, grid=(vecs // (t * u), 1)))
    for c, kss in ((64, (1, 2, 4, 8)), (128, (2, 4, 8, 16)), (256, (4, 8, 16, 32)), (512, (8, 16, 32, 64))):
        if n % c:
            continue
        for ks in kss:
            blocks = n // c * ks
            if blocks < 64 or blocks > 1100 or k % ks:
                continue
            for t, u in ((256, 4), (256, 8), (128, 8)):
                if (k // ks) % (t // (c // 8) * u) == 0:
                    out.append(dict(kind="band", C=c, KS=ks, T=t, U=u, POL=1, grid=(n // c, ks)))
    for c, r in ((64, 256), (128, 128), (256, 64), (512, 32)):
        for ks in (1, 2, 4, 8):
            blocks = n // c * ks
            if not 64 <= blocks <= 300 or (k // ks) % r:
                continue
            for s in (2, 4):
                for t in (256,):
                    out.append(dict(kind="ring", C=c, R=r, S=s, KS=ks, T=t, POL=1, grid=(n // c, ks),
                                    smem=s * r * c * 2))
                    out.append(dict(kind="bulk", C=c, R=r, S=s, KS=ks, T=t, POL=1, grid=(n // c, ks),
                                    smem=s * r * c * 2))
    for c, r, ks, st in ((64, 256, 1, 3), (128, 128, 1, 2), (128, 128, 1, 3), (128, 128, 1, 4),
                         (128, 256, 1, 2), (128, 64, 1, 6), (256, 64, 1, 4), (256, 128, 1, 2),
                         (192, 128, 1, 3), (64, 128, 1, 4), (64, 512, 1, 2)):
        if n % c == 0 and (k // ks) % r == 0 and st * r * c * 2 <= 200_000:
            out.append(dict(kind="ring", C=c, R=r, S=st, KS=ks, T=256, POL=1, grid=(n // c, ks),
                            smem=st * r * c * 2))
    for c, r, ks, st in ((64, 256, 1, 2), (64, 256, 1, 3), (64, 128, 1, 4), (64, 256, 2, 2),
                         (128, 128, 1, 4), (128, 256, 1, 2), (128, 256, 1, 3), (128, 128, 2, 3),
                         (192, 128, 1, 3), (256, 128, 1, 2), (256, 64, 1, 4), (64, 64, 1, 8)):
        if n % c == 0 and (k // ks) % r == 0 and st * r * c * 2 <= 200_000:
            for swz in (0, 3):
                out.append(dict(kind="tma", C=c, R=r, S=st, KS=ks, T=256, SWZ=swz, grid=(n // c, ks),
                                smem=st * r * c * 2 + 1024))
    if k == 8192:  # gated_mlp: W1 and W2 in one iteration, as the emitted kernel reads them
        for w2 in ("adjacent", "separate", "adjacent+8KB"):
            for pad, ks, s, il in ((0, 1, 4, 0), (1, 1, 4, 0), (1, 2, 2, 1), (0, 2, 2, 1), (1, 2, 2, 0)):
                out.append(dict(kind="ring2", C=64, R=128, S=s, KS=ks, T=256, POL=1, PAD=pad, INTERLEAVE=il,
                                w2=w2, grid=(64 * ks, 1) if il else (64, ks),
                                smem=s * 2 * 128 * (64 + 8 * pad) * 2))
    if quick:
        out = out[::4]
    return out


def source(v: dict[str, Any], k: int, n: int) -> str:
    tmpl = {"contig": CONTIG, "band": BAND, "ring": RING, "bulk": BULK, "ring2": RING2, "tma": TMA}[v["kind"]]
    return tmpl.format(K=k, N=n, **{a: b for a, b in v.items()
                                    if a not in ("grid", "smem", "kind", "name", "w2", "SWZ")},
                       name=v["name"])


def tensor_map(ptr: int, rows: int, cols: int, box_cols: int, box_rows: int, swizzle: int) -> Any:
    """A 2D fp16 row-major tensor map (128 bytes, 64-aligned), from the driver's
    ``cuTensorMapEncodeTiled`` called through ctypes."""
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    buf = ctypes.create_string_buffer(128 + 64)
    addr = (ctypes.addressof(buf) + 63) // 64 * 64
    dims = (ctypes.c_uint64 * 2)(cols, rows)
    strides = (ctypes.c_uint64 * 1)(cols * 2)
    box = (ctypes.c_uint32 * 2)(box_cols, box_rows)
    estr = (ctypes.c_uint32 * 2)(1, 1)
    err = cuda.cuTensorMapEncodeTiled(ctypes.c_void_p(addr), 6, 2, ctypes.c_void_p(ptr), dims, strides, box,
                                      estr, 0, swizzle, 2, 0)
    if err:
        raise RuntimeError(f"cuTensorMapEncodeTiled: error {err}")
    return (buf, addr)


def launch_with_map(rt: Any, f: Any, grid: tuple, threads: int, smem: int, stream: int, tmap: Any,
                    out_ptr: int) -> None:
    """Launch a kernel whose parameters are (tensor map by value, float*)."""
    import ctypes

    out_val = ctypes.c_void_p(out_ptr)
    params = (ctypes.c_void_p * 2)(tmap[1], ctypes.addressof(out_val))
    rt.ck(rt.drv.cuLaunchKernel(f, grid[0], grid[1], grid[2], threads, 1, 1, smem, stream,
                                ctypes.addressof(params), 0), "cuLaunchKernel")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-winners", action="store_true")
    ap.add_argument("--kinds", default="", help="only these kinds (comma-separated)")
    ap.add_argument("--shapes", default="", help="only these shapes' first words (rmsnorm, gated_mlp)")
    a = ap.parse_args()
    import numpy as np

    from mirage_formal.codegen.nvrtc import compile_cubin
    from mirage_formal.codegen.runtime import DeviceArray, runtime
    from mirage_formal.codegen.timing import time_launch
    from mirage_formal.ir.dtypes import DType

    rt = runtime()
    stream = rt.stream()

    def timed(run: Any) -> float:  # (the product's flush: MF_FLUSH picks which)
        return time_launch(rt, stream, run)

    results: list[dict[str, Any]] = []
    out_buf = DeviceArray((1 << 22,), DType.F32, rt)
    empty_src = 'extern "C" __global__ void empty_k(float* o) {}'
    for label, k, n in SHAPES:
        if a.shapes and label.split()[0] not in a.shapes.split(","):
            continue
        vs = [v for v in variants(k, n, a.quick) if not a.kinds or v["kind"] in a.kinds.split(",")]
        if not vs:
            continue
        for i, v in enumerate(vs):
            v["name"] = f"probe_{v['kind']}_{i}"
        src = HEAD + "\n".join(source(v, k, n) for v in vs) + "\n" + empty_src
        cubin = compile_cubin(src, "sm_90", name="stream_probe.cu")
        mod = rt.load(cubin)
        w = DeviceArray((k + 8, n), DType.F16, rt)
        w.copy_from(np.random.default_rng(0).uniform(-1, 1, (k + 8, n)).astype(np.float16))
        w_sep = DeviceArray((k // 2, n), DType.F16, rt)
        w_sep.copy_from(np.random.default_rng(1).uniform(-1, 1, (k // 2, n)).astype(np.float16))
        second = {"adjacent": w.ptr + k // 2 * n * 2, "separate": w_sep.ptr,
                  "adjacent+8KB": w.ptr + (k // 2 + 1) * n * 2}
        mb = k * n * 2 / 1e6
        fe = rt.function(mod, "empty_k", 0)
        def run_empty(fe: Any = fe) -> None:
            rt.launch(fe, (1, 1, 1), 32, 0, stream, [out_buf.ptr])
        results.append(dict(shape=label, kind="empty", us=timed(run_empty)))
        for v in vs:
            smem = v.get("smem", 0)
            try:
                f = rt.function(mod, v["name"], smem)
                grid = (*v["grid"], 1)

                args = [w.ptr, out_buf.ptr] + ([second[v["w2"]]] if "w2" in v else [])
                if v["kind"] == "tma":
                    tmap = tensor_map(w.ptr, k + 8, n, 64, v["R"], v["SWZ"])

                    def run(f: Any = f, grid: tuple = grid, v: dict = v, smem: int = smem,
                            tmap: Any = tmap) -> None:
                        launch_with_map(rt, f, grid, v["T"], smem, stream, tmap, out_buf.ptr)
                else:
                    def run(f: Any = f, grid: tuple = grid, v: dict = v, smem: int = smem,
                            args: list = args) -> None:
                        rt.launch(f, grid, v["T"], smem, stream, args)
                us = timed(run)
            except Exception as e:  # a probe: record and go on
                results.append(dict(shape=label, **{x: y for x, y in v.items() if x != "name"}, error=str(e)[:200]))
                continue
            results.append(dict(shape=label, **{x: y for x, y in v.items() if x != "name"}, us=us,
                                tbs=mb / us))
            print(f"{label:16} {v['kind']:6} {json.dumps({x: y for x, y in v.items() if x not in ('name', 'kind')})}"
                  f"  {us:6.2f} us  {mb / us:5.2f} TB/s", flush=True)
    if not a.no_winners:
        from retime_winners import winner

        from mirage_formal.codegen import compile_graph
        from mirage_formal.codegen.timing import device_inputs, time_like_baselines
        rows = {f"{r['workload']}:{r['b']}": r for r in
                json.loads((ROOT / "benchmarks/results/gpu_optimize_latest.json").read_text())}
        for name in ("rmsnorm:1", "gated_mlp:1", "rmsnorm:8"):
            graph, sched = winner(rows[name])
            cg = compile_graph(graph, schedules=sched)
            us = time_like_baselines(cg, inputs=device_inputs(cg, seed=3))
            results.append(dict(shape=name, kind="table winner", us=us))
            print(f"{name:16} winner {us:6.2f} us", flush=True)
    print("\nfastest of each kind:")
    for label, _, _ in SHAPES:
        for kind in ("empty", "contig", "band", "ring", "bulk", "ring2", "tma"):
            rs = [r for r in results if r["shape"] == label and r["kind"] == kind and "us" in r]
            if rs:
                b = min(rs, key=lambda r: r["us"])
                print(f"  {label:16} {kind:6} {b['us']:6.2f} us  "
                      + json.dumps({x: y for x, y in b.items() if x not in ('shape', 'kind', 'us', 'tbs')}))
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
