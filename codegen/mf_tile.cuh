// mirage-formal device library: tile primitives that generated kernels include.
//
// Every generated kernel keeps its block tiles in fp32 (shared memory, or a per-block global
// workspace when shared memory is too small) and converts at the edges: loads from fp16/bf16/
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

// ---------------------------------------------------------------- 16-byte vector moves
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

// Elements of storage type T in one 16-byte vector.
template <typename T> struct vec_width { static constexpr int value = 16 / sizeof(T); };

// ---------------------------------------------------------------- reductions
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

// Pack two fp32 values into one register of two halves (low = first).
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&h);
}

}  // namespace mf
