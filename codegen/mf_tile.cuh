// mirage-formal device library: tile primitives that generated kernels include.
//
// Every generated kernel keeps its block tiles in fp32 (shared memory, or a per-block global
// workspace when shared memory is too small), except fp16 loop tiles read only by tensor-core
// matmuls, which stay raw fp16 (cp.async, ldmatrix); fp32 tiles convert at the edges: loads from fp16/bf16/
// fp32 device tensors, stores back to the storage type. These helpers are the edges and the
// reductions; the index arithmetic of each tile is emitted by mirage_formal.codegen.emit with
// compile-time shapes. Edit here to change *how* tiles move or reduce; keep the signatures.
//
// Requires cuda_fp16.h and cuda_bf16.h (the emitted source includes them first).
#pragma once

namespace mf {

// ---------------------------------------------------------------- conversions
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// ---------------------------------------------------------------- 16-byte vector moves (8- and 4-byte below)
// Widen one 16-byte vector of storage elements (8 halves, or 4 floats) to fp32 and store
// them with 16-byte shared-memory stores. dst is 16-byte aligned.
__device__ __forceinline__ void unpack_vec(const uint4& v, float* dst, const __half*) {
  const __half2* h = reinterpret_cast<const __half2*>(&v);
  float2 a = __half22float2(h[0]), b = __half22float2(h[1]);
  float2 c = __half22float2(h[2]), d = __half22float2(h[3]);
  reinterpret_cast<float4*>(dst)[0] = make_float4(a.x, a.y, b.x, b.y);
  reinterpret_cast<float4*>(dst)[1] = make_float4(c.x, c.y, d.x, d.y);
}
__device__ __forceinline__ void unpack_vec(const uint4& v, float* dst, const __nv_bfloat16*) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
  float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
  float2 c = __bfloat1622float2(h[2]), d = __bfloat1622float2(h[3]);
  reinterpret_cast<float4*>(dst)[0] = make_float4(a.x, a.y, b.x, b.y);
  reinterpret_cast<float4*>(dst)[1] = make_float4(c.x, c.y, d.x, d.y);
}
__device__ __forceinline__ void unpack_vec(const uint4& v, float* dst, const float*) {
  *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(&v);
}
// Read 16 bytes from global memory (read-only path), to be widened later (prefetching).
__device__ __forceinline__ uint4 ld_raw(const void* src) {
  return __ldg(reinterpret_cast<const uint4*>(src));
}

// Load 16 bytes of storage elements (8 halves, or 4 floats) and widen them to fp32.
// Caller guarantees 16-byte alignment of src and dst.
template <typename T> __device__ __forceinline__ void ld_vec(const T* src, float* dst) {
  unpack_vec(ld_raw(src), dst, src);
}

// Narrow fp32 values to the storage type and store 16 bytes. dst is 16-byte aligned.
__device__ __forceinline__ void st_vec(__half* dst, const float* src) {
  uint4 v;
  __half2* h = reinterpret_cast<__half2*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(src[2 * i], src[2 * i + 1]);
  *reinterpret_cast<uint4*>(dst) = v;
}
__device__ __forceinline__ void st_vec(__nv_bfloat16* dst, const float* src) {
  uint4 v;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(src[2 * i], src[2 * i + 1]);
  *reinterpret_cast<uint4*>(dst) = v;
}
__device__ __forceinline__ void st_vec(float* dst, const float* src) {
  *reinterpret_cast<float4*>(dst) = make_float4(src[0], src[1], src[2], src[3]);
}

// A pair of 16-bit values to two fp32 values.
__device__ __forceinline__ float2 to_f2(__half2 h) { return __half22float2(h); }
__device__ __forceinline__ float2 to_f2(__nv_bfloat162 h) { return __bfloat1622float2(h); }

// ---------------------------------------------------------------- 8- and 4-byte vector moves
// Tiles whose rows are not a multiple of 16 bytes (12 or 22 halves, say) still move whole
// vectors: 8 bytes (uint2) or 4 bytes (unsigned) of storage elements, so prefetching keeps
// them in registers like the 16-byte ones. dst needs only the element type's alignment.
template <int B> struct raw_vec;
template <> struct raw_vec<16> { using type = uint4; };
template <> struct raw_vec<8> { using type = uint2; };
template <> struct raw_vec<4> { using type = unsigned; };
template <int B> __device__ __forceinline__ typename raw_vec<B>::type ld_rawn(const void* src) {
  return __ldg(reinterpret_cast<const typename raw_vec<B>::type*>(src));
}
template <typename H2> __device__ __forceinline__ void unpack_pairs(const unsigned* w, int n, float* dst) {
#pragma unroll
  for (int i = 0; i < n; ++i) {
    const float2 f = to_f2(*reinterpret_cast<const H2*>(&w[i]));
    dst[2 * i] = f.x;
    dst[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void unpack_vec(const uint2& v, float* dst, const __half*) {
  unpack_pairs<__half2>(reinterpret_cast<const unsigned*>(&v), 2, dst);
}
__device__ __forceinline__ void unpack_vec(const uint2& v, float* dst, const __nv_bfloat16*) {
  unpack_pairs<__nv_bfloat162>(reinterpret_cast<const unsigned*>(&v), 2, dst);
}
__device__ __forceinline__ void unpack_vec(const uint2& v, float* dst, const float*) {
  dst[0] = __uint_as_float(v.x);
  dst[1] = __uint_as_float(v.y);
}
__device__ __forceinline__ void unpack_vec(const unsigned& v, float* dst, const __half*) {
  unpack_pairs<__half2>(&v, 1, dst);
}
__device__ __forceinline__ void unpack_vec(const unsigned& v, float* dst, const __nv_bfloat16*) {
  unpack_pairs<__nv_bfloat162>(&v, 1, dst);
}
__device__ __forceinline__ void unpack_vec(const unsigned& v, float* dst, const float*) {
  dst[0] = __uint_as_float(v);
}
// The same reads with an L2 fetch-size hint (sm_80+): a miss brings L2 = 128 or 256 bytes
// around the address from DRAM instead of the 32-byte sectors asked for, so tiles of short
// rows (24 to 96 bytes) that neighbouring blocks read at about the same time cost fewer,
// larger DRAM accesses. Read-only data only (.nc), like __ldg.
template <int B, int L2> __device__ __forceinline__ typename raw_vec<B>::type ld_rawn_l2(const void* src) {
  if constexpr (B == 16) {
    uint4 v;
    if constexpr (L2 == 256) {
      asm("ld.global.nc.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(src));
    } else {
      asm("ld.global.nc.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(src));
    }
    return v;
  } else if constexpr (B == 8) {
    uint2 v;
    if constexpr (L2 == 256) {
      asm("ld.global.nc.L2::256B.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(src));
    } else {
      asm("ld.global.nc.L2::128B.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(src));
    }
    return v;
  } else {
    unsigned v;
    if constexpr (L2 == 256) {
      asm("ld.global.nc.L2::256B.u32 %0, [%1];" : "=r"(v) : "l"(src));
    } else {
      asm("ld.global.nc.L2::128B.u32 %0, [%1];" : "=r"(v) : "l"(src));
    }
    return v;
  }
}
// The same reads under an L2 cache policy (sm_80+; POL from l2_evict_first below) and, with
// L2 = 128 or 256, the fetch-size hint of ld_rawn_l2 (L2 = 0: none).
#define MF_LD_POL(PF)                                                                           \
  if constexpr (B == 16) {                                                                      \
    uint4 v;                                                                                    \
    asm("ld.global.nc.L2::cache_hint" PF ".v4.u32 {%0,%1,%2,%3}, [%4], %5;"                   \
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(src), "l"(pol));                   \
    return v;                                                                                   \
  } else if constexpr (B == 8) {                                                                \
    uint2 v;                                                                                    \
    asm("ld.global.nc.L2::cache_hint" PF ".v2.u32 {%0,%1}, [%2], %3;"                          \
        : "=r"(v.x), "=r"(v.y) : "l"(src), "l"(pol));                                         \
    return v;                                                                                   \
  } else {                                                                                      \
    unsigned v;                                                                                 \
    asm("ld.global.nc.L2::cache_hint" PF ".u32 %0, [%1], %2;" : "=r"(v) : "l"(src), "l"(pol)); \
    return v;                                                                                   \
  }
template <int B, int L2>
__device__ __forceinline__ typename raw_vec<B>::type ld_rawn_pol(const void* src, unsigned long long pol) {
  if constexpr (L2 == 256) {
    MF_LD_POL(".L2::256B")
  } else if constexpr (L2 == 128) {
    MF_LD_POL(".L2::128B")
  } else {
    MF_LD_POL("")
  }
}
#undef MF_LD_POL
// An L2 eviction policy under which the lines a read brings in are the first victims when L2
// needs room (createpolicy, sm_80+): data read once (a weight stream) then does not push out
// lines that are still wanted, or dirty lines whose eviction costs a DRAM write each.
__device__ __forceinline__ unsigned long long l2_evict_first() {
  unsigned long long pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}
// Load B bytes of storage elements (B = 8 or 4; src aligned to B) and widen them to fp32.
template <int B, typename T> __device__ __forceinline__ void ld_vecn(const T* src, float* dst) {
  unpack_vec(ld_rawn<B>(src), dst, src);
}
// Narrow B / sizeof(T) fp32 values to the storage type and store them as one B-byte vector.
template <int B, typename T> __device__ __forceinline__ void st_vecn(T* dst, const float* src) {
  constexpr int n = B / sizeof(T);
  alignas(B) T h[n];
#pragma unroll
  for (int i = 0; i < n; ++i) h[i] = from_f<T>(src[i]);
  *reinterpret_cast<typename raw_vec<B>::type*>(dst) = *reinterpret_cast<const typename raw_vec<B>::type*>(h);
}

// Elements of storage type T in one 16-byte vector.
template <typename T> struct vec_width { static constexpr int value = 16 / sizeof(T); };

// 8 consecutive elements (16-byte aligned; shared or global memory) to fp32 registers, and
// back: the row-wise kernels (rms_norm) move whole 16-byte vectors per lane.
// (H2: __half2 or __nv_bfloat162, the pair type of the 16-bit storage type)
template <typename H2> __device__ __forceinline__ void ld8_pairs(const void* p, float* v) {
  const uint4 r = *reinterpret_cast<const uint4*>(p);
  const H2* h = reinterpret_cast<const H2*>(&r);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = to_f2(h[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void ld8(const __half* p, float* v) { ld8_pairs<__half2>(p, v); }
__device__ __forceinline__ void ld8(const __nv_bfloat16* p, float* v) {
  ld8_pairs<__nv_bfloat162>(p, v);
}
__device__ __forceinline__ void ld8(const float* p, float* v) {
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
  v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}
__device__ __forceinline__ void st8(__half* p, const float* v) { st_vec(p, v); }
__device__ __forceinline__ void st8(__nv_bfloat16* p, const float* v) { st_vec(p, v); }
__device__ __forceinline__ void st8(float* p, const float* v) {
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

// ---------------------------------------------------------------- split-combine tickets
// A block's ticket: add 1 to the counter with acquire-release semantics at GPU scope. Called
// by one thread after a block barrier, it publishes the block's partials (the barrier orders
// the other threads' stores before it; release is cumulative) and, for the last block, makes
// every other block's partials visible to the reads after the next barrier: one atomic
// instead of a fence, an atomic and a second fence.
__device__ __forceinline__ unsigned ticket_acq_rel(unsigned* counter) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
  return old;
#else
  __threadfence();
  const unsigned old = atomicAdd(counter, 1u);
  __threadfence();
  return old;
#endif
}

// ---------------------------------------------------------------- launch overlap
// Programmatic dependent launch (sm_90+): wait until the previous kernel of the stream has
// finished and its writes are visible (a no-op when it was launched in plain stream order),
// and let the next kernel begin launching. Older architectures run in stream order anyway.
__device__ __forceinline__ void grid_dep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dep_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---------------------------------------------------------------- thread-block clusters
// (sm_90) A barrier over every thread of the block's cluster, releasing this thread's earlier
// shared- and global-memory writes to the cluster and acquiring the others'; and a load of a
// float from the same shared-memory offset in the cluster's block of rank `rank` (DSMEM).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n"
               ::: "memory");
}
__device__ __forceinline__ float ld_cluster(const float* p, unsigned rank) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  unsigned m;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(m) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(m) : "memory");
  return v;
}

// ---------------------------------------------------------------- reductions
// Sum over each aligned group of G lanes (G a power of two <= 32); every lane of the warp
// must call it.
template <int G> __device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// ---------------------------------------------------------------- tensor-core tiles
// One m16n8k16 tensor-core product with fp16 operands and fp32 accumulators (sm_80+):
// d += a * b, fragments as laid out by the PTX ISA for mma.sync.aligned.m16n8k16.row.col.
__device__ __forceinline__ void mma_16816(float* d, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The same with bf16 operands (mma.sync ... .f32.bf16.bf16.f32; the fragment layout is the
// fp16 one).
__device__ __forceinline__ void mma_16816_bf(float* d, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// fp32 products on tensor cores as three TF32 products (Schedule.tf32x3). tf32_split: x as
// big = x rounded to TF32 (cvt.rna: 10 mantissa bits, nearest, ties away) and small =
// (x - big) rounded to TF32; x - big is exact in fp32, so big + small is x to within
// 2^-22 |x|. (A |x| within one TF32 ulp of FLT_MAX rounds big to infinity; no such operand
// occurs at the validators' input ranges.)
__device__ __forceinline__ void tf32_split(float x, unsigned& big, unsigned& small) {
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(x));
  const float rest = x - __uint_as_float(big);
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(small) : "f"(rest));
}
// One m16n8k8 tensor-core product with TF32 operands and fp32 accumulators (sm_80+): d += a *
// b, fragments as laid out by the PTX ISA for mma.sync.aligned.m16n8k8.row.col .tf32. A
// product of fp32 values split by tf32_split is the sum of three: small·big, big·small and
// big·big (small·small, below 2^-22 |a b|, left out; print_tf32).
__device__ __forceinline__ void mma_1688_tf32(float* d, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// e^x as one MUFU.EX2 of x * log2(e), with denormal results flushed to zero. __expf without
// -ftz costs a range test and two more multiplies a value (its non-ftz ex2 rescales
// arguments below -126); a result under 2^-126 is zero in fp16 and bf16 anyway, and in an
// fp32 tile or sum it is below every validation tolerance. Same relative error as __expf
// (2 ulp plus the rounding of x * log2(e)).
__device__ __forceinline__ float exp_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}

// x / y with the hardware reciprocal (__fdividef: 2 ulp for 2^-126 <= |y| <= 2^126; a
// divisor above 2^126 gives 0, an infinite x NaN). The IEEE division is a subroutine call
// with a slow path per element; in rmsnorm's fused epilogue (each output divided by its
// row's rms) it cost 0.1-0.4 µs of 24.6 (H100, s28 c7, c8). Every tolerance the validation
// uses is far above 2 ulp of fp32.
__device__ __forceinline__ float div_fast(float x, float y) { return __fdividef(x, y); }

// A pair of 16-bit values (__half2 or __nv_bfloat162) as one 32-bit fragment register.
template <typename P> __device__ __forceinline__ unsigned pair_bits(P h) {
  return *reinterpret_cast<unsigned*>(&h);
}
// Pack two fp32 values into one register of two halves (low = first).
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  return pair_bits(__floats2half2_rn(lo, hi));
}

// Two adjacent fp32 values (8-byte aligned) as a half2 fragment register: one 64-bit load.
__device__ __forceinline__ unsigned pack_f2(const float* p) {
  const float2 v = *reinterpret_cast<const float2*>(p);
  return pack_half2(v.x, v.y);
}

// Pack two halves into one register (low = first).
__device__ __forceinline__ unsigned pack_h2(__half lo, __half hi) {
  return pair_bits(__halves2half2(lo, hi));
}
__device__ __forceinline__ __half hzero() { return __ushort_as_half((unsigned short)0); }

// The bf16 counterparts of pack_half2, pack_f2, pack_h2 and hzero (bf16 fragments).
__device__ __forceinline__ unsigned pack_bf2(float lo, float hi) {
  return pair_bits(__floats2bfloat162_rn(lo, hi));
}
__device__ __forceinline__ unsigned pack_bf2(const float* p) {
  const float2 v = *reinterpret_cast<const float2*>(p);
  return pack_bf2(v.x, v.y);
}
__device__ __forceinline__ unsigned pack_b2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return pair_bits(__halves2bfloat162(lo, hi));
}
__device__ __forceinline__ __nv_bfloat16 bzero() { return __ushort_as_bfloat16((unsigned short)0); }
// bf16 fragment registers: the sum of the two values, and of their squares (as h2_sum, h2_sq).
__device__ __forceinline__ float bf2_sum(unsigned r) {
  const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r));
  return v.x + v.y;
}
__device__ __forceinline__ float bf2_sq(unsigned r) {
  const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r));
  return v.x * v.x + v.y * v.y;
}

// The two halves of a fragment register (low, high) in fp32: their sum, and the sum of
// their squares (a fold's terms taken from mma A fragments already in registers).
__device__ __forceinline__ float h2_sum(unsigned r) {
  const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&r));
  return v.x + v.y;
}
// One half2 op on two packed fragment registers (Schedule.a_op_fragments: A = X op Y).
__device__ __forceinline__ unsigned h2_add(unsigned a, unsigned b) {
  __half2 r = __hadd2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
  return *reinterpret_cast<unsigned*>(&r);
}
__device__ __forceinline__ unsigned h2_sub(unsigned a, unsigned b) {
  __half2 r = __hsub2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
  return *reinterpret_cast<unsigned*>(&r);
}
__device__ __forceinline__ unsigned h2_mul(unsigned a, unsigned b) {
  __half2 r = __hmul2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
  return *reinterpret_cast<unsigned*>(&r);
}
// The low and high halves of a packed half2 register as floats (packed back: pack_half2).
__device__ __forceinline__ float h2_lo(unsigned r) {
  return __low2float(*reinterpret_cast<const __half2*>(&r));
}
__device__ __forceinline__ float h2_hi(unsigned r) {
  return __high2float(*reinterpret_cast<const __half2*>(&r));
}
__device__ __forceinline__ float h2_sq(unsigned r) {
  const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&r));
  return v.x * v.x + v.y * v.y;
}

// ---------------------------------------------------------------- cp.async (sm_80+)
// Asynchronous 16-byte copy global -> shared, bypassing L1 (.cg). Both addresses 16-byte
// aligned. Completion is tracked per thread by commit groups: cp_async_commit() closes the
// group of copies issued since the last commit, cp_async_wait<N>() blocks until at most N
// of this thread's groups are pending; a __syncthreads() afterwards makes every thread's
// copies visible to the block.
__device__ __forceinline__ void cp_async16(void* smem_dst, const void* gmem_src) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src)
               : "memory");
}
// cp_async16 with an L2 fetch-size hint (see ld_rawn_l2).
template <int L2> __device__ __forceinline__ void cp_async16_l2(void* smem_dst, const void* gmem_src) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  if constexpr (L2 == 256) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src)
                 : "memory");
  } else {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src)
                 : "memory");
  }
}
// cp_async16 under an L2 cache policy (see l2_evict_first), with the fetch-size hint of
// cp_async16_l2 when L2 = 128 or 256. ptxas 13.0 miscompiles this copy when it folds a uniform
// part of the shared address into the instruction (LDGSTS [Rn+URm]): it then encodes the
// policy's descriptor in a uniform register nothing wrote (desc[UR1]), and the kernel faults
// with CUDA_ERROR_ILLEGAL_INSTRUCTION on an H100. Passing the address as 64 bits avoided it in
// some kernels, not all (rmsnorm's matmul at 256 threads with gemv, split or not, still
// faulted). The address now goes through an identity byte permute (prmt), an instruction
// ptxas keeps and cannot split into a uniform base and an offset, so the copy takes one
// plain register address (one ALU instruction per 16-byte copy). tests/codegen/test_sass.py
// looks for the miscompile in the kernels that faulted and a sample of the tuner's schedules.
template <int L2>
__device__ __forceinline__ void cp_async16_pol(void* smem_dst, const void* gmem_src, unsigned long long pol) {
  const unsigned d32 = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  unsigned dst;
  asm("prmt.b32 %0, %1, 0, 0x3210;" : "=r"(dst) : "r"(d32));
  if constexpr (L2 == 256) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2;\n"
                 ::"r"(dst), "l"(gmem_src), "l"(pol) : "memory");
  } else if constexpr (L2 == 128) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::128B [%0], [%1], 16, %2;\n"
                 ::"r"(dst), "l"(gmem_src), "l"(pol) : "memory");
  } else {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n"
                 ::"r"(dst), "l"(gmem_src), "l"(pol) : "memory");
  }
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// ---------------------------------------------------------------- ldmatrix (sm_75+)
// Four 8x8 b16 matrices; lane l gives the shared address of row l % 8 of matrix l / 8 (rows
// 16-byte aligned) and receives in r[j] row l / 4, columns 2(l % 4), +1 of matrix j: for
// matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15)
// of a row-major 16x16 tile, exactly the A fragment of mma.m16n8k16.
__device__ __forceinline__ void ldsm_x4(unsigned* r, const __half* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a) : "memory");
}
// Two 8x8 b16 matrices, transposed; lanes 0-15 give row addresses (lanes 16-31 ignored):
// for rows k0..k0+15 of a row-major K x N tile at columns n0..n0+7, r[0], r[1] are the B
// fragment of mma.m16n8k16 (k 2(l % 4), +1 and +8, column l / 4).
__device__ __forceinline__ void ldsm_x2_trans(unsigned* r, const __half* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(a) : "memory");
}

// Four 8x8 b16 matrices, transposed; lanes 0-15 address rows k0..k0+15 at columns n0..n0+7,
// lanes 16-31 the same rows at columns n0+8..n0+15: r[0], r[1] are the B fragment of
// mma.m16n8k16 for columns n0..n0+7 and r[2], r[3] for n0+8..n0+15 (two ldsm_x2_trans in
// one instruction).
__device__ __forceinline__ void ldsm_x4_trans(unsigned* r, const __half* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a) : "memory");
}

// The A fragment of mma.m16n8k16 for a tile of at most 8 rows: two 8x8 b16 matrices, lanes
// 0-7 giving rows 0-7 at k 0-7 and lanes 8-15 the same rows at k 8-15 (lanes 16-31 ignored),
// into r[0] and r[2]; r[1] and r[3] (rows 8-15, padding) are zero. Half the shared-memory
// reads of ldsm_x4 for a skinny A.
__device__ __forceinline__ void ldsm_x2_rows8(unsigned* r, const __half* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[2])
               : "r"(a) : "memory");
  r[1] = 0u;
  r[3] = 0u;
}

// ldmatrix moves 16-bit elements whatever they are: the same for bf16 tiles.
__device__ __forceinline__ void ldsm_x4(unsigned* r, const __nv_bfloat16* p) {
  ldsm_x4(r, reinterpret_cast<const __half*>(p));
}
__device__ __forceinline__ void ldsm_x2_rows8(unsigned* r, const __nv_bfloat16* p) {
  ldsm_x2_rows8(r, reinterpret_cast<const __half*>(p));
}
__device__ __forceinline__ void ldsm_x2_trans(unsigned* r, const __nv_bfloat16* p) {
  ldsm_x2_trans(r, reinterpret_cast<const __half*>(p));
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned* r, const __nv_bfloat16* p) {
  ldsm_x4_trans(r, reinterpret_cast<const __half*>(p));
}

// ---------------------------------------------------------------- TMA ring (sm_90)
// Schedule.tma_ring: one producer warp moves each stage of the ring with 2D tensor-map copies
// (cp.async.bulk.tensor, the copy engine; one instruction per 64-column box) and the consumer
// warps wait for a stage on its "full" mbarrier and hand it back on its "empty" one, so no
// refill waits for a block-wide barrier. The tensor map is a 128-byte opaque object the host
// builds (cuTensorMapEncodeTiled) and passes by value as a __grid_constant__ parameter.
struct __align__(64) TensorMap {
  unsigned long long opaque[16];
};
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// Bytes to add to a dynamic shared-memory base so that it is 1024-byte aligned (the 128-byte
// swizzle of tensor-map copies repeats every 1024 bytes and is taken from the address bits).
__device__ __forceinline__ unsigned align1024_pad(const void* p) {
  return (1024u - (smem_u32(p) & 1023u)) & 1023u;
}
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
// Makes the mbarrier initializations visible to the copy engine (before the block barrier
// that follows them).
__device__ __forceinline__ void mbar_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
// Block until the phase of parity ``parity`` of ``bar`` has completed.
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred p;\n MF_WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra MF_WAIT_%=;\n}\n" ::"r"(smem_u32(bar)), "r"(parity) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// One arrival that also expects ``bytes`` of copies to complete on ``bar`` this phase.
__device__ __forceinline__ void mbar_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void tensormap_prefetch(const TensorMap* map) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
#endif
}
// Copy the box at element coordinates (x: innermost, y) of ``map`` to shared memory ``dst``
// (1024-byte aligned for the 128-byte swizzle), completing on ``bar``; ``POL``: under L2
// policy ``pol`` (l2_evict_first). Traps below sm_90 (the tuner only proposes it there).
template <bool POL>
__device__ __forceinline__ void tma_load_2d(void* dst, const TensorMap* map, int x, int y,
                                            unsigned long long* bar, unsigned long long pol) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (POL) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(dst)), "l"(map), "r"(x), "r"(y),
        "r"(smem_u32(bar)), "l"(pol) : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_u32(dst)), "l"(map), "r"(x), "r"(y),
        "r"(smem_u32(bar)) : "memory");
  }
#else
  __trap();
#endif
}
// Schedule.tma_multicast: a pair of blocks (a cluster of two) sharing a tile. The copy lands
// at the same shared-memory offset in every block of ``mask`` (cluster ranks) and completes
// on the mbarrier at ``bar``'s offset in each; a consumer gives a slot back to the block of
// cluster rank ``rank`` (its own or its peer's: a stage is refilled once both gave it back).
template <bool POL>
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const TensorMap* map, int x, int y,
                                                      unsigned long long* bar, unsigned short mask,
                                                      unsigned long long pol) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (POL) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5, %6;" ::"r"(smem_u32(dst)), "l"(map), "r"(x),
        "r"(y), "r"(smem_u32(bar)), "h"(mask), "l"(pol) : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(dst)), "l"(map), "r"(x), "r"(y),
        "r"(smem_u32(bar)), "h"(mask) : "memory");
  }
#else
  __trap();
#endif
}
// (The arrival keeps mbarrier.arrive's default release at CTA scope, and the producer's wait
// its default acquire, as CUTLASS's cluster barriers do; the slot's reads it orders are the
// arriving thread's own. With both at cluster scope the pair's kernels ran 2-4x slower:
// H100 s33 c3.)
__device__ __forceinline__ void mbar_arrive_cluster(unsigned long long* bar, unsigned rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned m;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(m) : "r"(smem_u32(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(m) : "memory");
#else
  __trap();
#endif
}
// A barrier of the first N threads of the block (the consumer warps of a TMA ring kernel;
// the producer warp does not take part): named barrier 1.
template <int N> __device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(N) : "memory");
}

// Warpgroup MMA (wgmma, sm_90a: Schedule.wgmma). A shared-memory matrix descriptor of a tile
// in the TMA ring's layout: rows of 128 bytes whose 16-byte chunks the copy engine's 128-byte
// swizzle placed at c ^ (r & 7), 8-row groups 1024 bytes apart (stride 64 in 16-byte units),
// the leading offset unused (1), the 128-byte swizzle mode (1 in bits 62-63); the start
// address in 16-byte units. The tile's 1024-byte periods start on 1024-byte boundaries. An
// N-major operand of more than 64 columns spans boxes: ``lbo`` is then the boxes' distance.
__device__ __forceinline__ unsigned long long wgmma_desc(unsigned addr, unsigned lbo = 1) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
         (static_cast<unsigned long long>(lbo) << 16) | (64ull << 32) | (1ull << 62);
}
// Order this thread's earlier register writes of the accumulators before the warpgroup's
// next wgmma reads them.
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
// Wait until every committed wgmma group of this warpgroup has completed (its accumulators
// may be read, its shared-memory operands reused).
__device__ __forceinline__ void wgmma_wait_all() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
}
// Wait until at most the latest committed wgmma group of this warpgroup is still running:
// the one before it has completed (its shared-memory operands may be reused).
__device__ __forceinline__ void wgmma_wait_one() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
#endif
}
// d (N/2 floats of this thread: for 8-column tile j, d[4j..4j+3] at rows g, g, g+8, g+8 and
// columns 8j+2q, +1, 8j+2q, +1 of the warp's 16 rows, as mma_16816's C) += A (64 x 16,
// K-major, descriptor da) x B (16 x N, N-major: each 128-byte row one k and 64 columns, the
// next 64 columns LBO further: descriptor db). N is 64, 128 or 256; BF: bf16 operands.
#define MF_ACC8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), \
                   "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
// (one body for both operand types: T is the PTX type, "f16" or "bf16")
#define MF_WGMMA_BODY(MF_WG_T) \
  if constexpr (N == 64) { \
    asm volatile( \
        "{\n .reg .pred p;\n setp.ne.b32 p, 1, 0;\n" \
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." MF_WG_T "." MF_WG_T " {" \
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31" \
        "}, %32, %33, p, 1, 1, 0, 1;\n}\n" \
        : MF_ACC8(0), MF_ACC8(8), MF_ACC8(16), MF_ACC8(24) \
        : "l"(da), "l"(db)); \
  } else if constexpr (N == 128) { \
    asm volatile( \
        "{\n .reg .pred p;\n setp.ne.b32 p, 1, 0;\n" \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." MF_WG_T "." MF_WG_T " {" \
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63" \
        "}, %64, %65, p, 1, 1, 0, 1;\n}\n" \
        : MF_ACC8(0), MF_ACC8(8), MF_ACC8(16), MF_ACC8(24), MF_ACC8(32), MF_ACC8(40), MF_ACC8(48), MF_ACC8(56) \
        : "l"(da), "l"(db)); \
  } else { \
    asm volatile( \
        "{\n .reg .pred p;\n setp.ne.b32 p, 1, 0;\n" \
        "wgmma.mma_async.sync.aligned.m64n256k16.f32." MF_WG_T "." MF_WG_T " {" \
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127" \
        "}, %128, %129, p, 1, 1, 0, 1;\n}\n" \
        : MF_ACC8(0), MF_ACC8(8), MF_ACC8(16), MF_ACC8(24), MF_ACC8(32), MF_ACC8(40), MF_ACC8(48), MF_ACC8(56), MF_ACC8(64), MF_ACC8(72), MF_ACC8(80), MF_ACC8(88), MF_ACC8(96), MF_ACC8(104), MF_ACC8(112), MF_ACC8(120) \
        : "l"(da), "l"(db)); \
  }
template <int N, bool BF = false>
__device__ __forceinline__ void wgmma_m64nNk16(float* d, unsigned long long da, unsigned long long db) {
  static_assert(N == 64 || N == 128 || N == 256, "wgmma_m64nNk16: N must be 64, 128 or 256");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (BF) {
    MF_WGMMA_BODY("bf16")
  } else {
    MF_WGMMA_BODY("f16")
  }
#else
  __trap();
#endif
}
#undef MF_ACC8
#undef MF_WGMMA_BODY

}  // namespace mf
