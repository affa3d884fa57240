
#include <cuda_fp16.h>
typedef unsigned long long u64;
struct __align__(64) TMap { u64 v[16]; };
__device__ __forceinline__ u64 pol_first() {
  u64 p; asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ unsigned sa(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_wait(unsigned b, unsigned phase) {
  asm volatile("{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}"
               :: "r"(b), "r"(phase) : "memory");
}
__device__ __forceinline__ void tma2d(unsigned dst, const void* map, int x, int y, unsigned bar, u64 pol, bool use_pol) {
  if (use_pol)
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;"
                 :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar), "l"(pol) : "memory");
  else
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory");
}

extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_0(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 64, S = 8, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_1(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 64, S = 8, NC = 4, MODE = 1;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_2(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 64, S = 8, NC = 4, MODE = 2;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_3(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 3, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_4(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 3, NC = 4, MODE = 1;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_5(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 3, NC = 4, MODE = 2;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_6(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 4, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_7(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 4, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 0);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_8(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 4, NC = 4, MODE = 1;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_9(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 4, NC = 4, MODE = 2;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_10(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 5, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_11(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 5, NC = 4, MODE = 1;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_12(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 5, NC = 4, MODE = 2;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_13(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 6, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_14(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 6, NC = 4, MODE = 1;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_15(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 6, NC = 4, MODE = 2;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_16(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 2, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_17(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 2, NC = 4, MODE = 1;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_18(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 2, NC = 4, MODE = 2;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_19(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 3, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_20(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 3, NC = 4, MODE = 1;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_21(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 3, NC = 4, MODE = 2;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_22(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 4, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_23(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 4, NC = 4, MODE = 1;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_24(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 4, NC = 4, MODE = 2;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_25(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 64, S = 8, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_26(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 3, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_27(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 4, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_28(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 5, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_29(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 6, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_30(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 2, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_31(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 3, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_32(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 4, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_33(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 64, S = 8, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_34(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 3, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_35(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 4, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_36(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 4, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 0);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_37(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 5, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_38(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 6, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_39(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 2, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_40(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 3, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((4 + 1) * 32, 1)
ws_41(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 4, NC = 4, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_42(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 64, S = 8, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_43(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 3, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_44(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 4, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_45(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 5, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_46(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 128, S = 6, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_47(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 2, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_48(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 3, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}


extern "C" __global__ void __launch_bounds__((8 + 1) * 32, 1)
ws_49(const __grid_constant__ TMap tw, const __grid_constant__ TMap tx, half* __restrict__ out, int mrows) {
  constexpr int R = 256, S = 4, NC = 8, MODE = 0;
  constexpr int WB = R * 128, XB = 16 * 128, XBOX = R / 64, STAGE = WB + XBOX * XB, IT = 4096 / R;
  constexpr int WCOLS = 64 / NC, NT = WCOLS / 8, RW = 16 / NC, LPR = 32 / RW, CPR = R / 8;
  extern __shared__ __align__(16) unsigned char sm_raw[];
  __shared__ __align__(8) u64 full[S], empty[S];
  __shared__ float ss_sh[16];
  unsigned char* sm = sm_raw + ((1024 - (sa(sm_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(&empty[s])), "r"(NC));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tw) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tx) : "memory");
      const u64 pol = pol_first();
      int s = 0; unsigned ph = 0;
      for (int it = 0; it < IT; ++it) {
        if (it >= S) mbar_wait(sa(&empty[s]), ph ^ 1);
        const unsigned fb = sa(&full[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(STAGE) : "memory");
        const unsigned st = sa(sm + s * STAGE);
        tma2d(st, &tw, c0, it * R, fb, pol, true);
        #pragma unroll
        for (int j = 0; j < XBOX; ++j) tma2d(st + WB + j * XB, &tx, it * R + j * 64, 0, fb, pol, 1);
        if (++s == S) { s = 0; ph ^= 1; }
      }
    }
    return;
  }
  float acc[NT][2][4];
  #pragma unroll
  for (int t = 0; t < NT; ++t)
    #pragma unroll
    for (int c = 0; c < 2; ++c)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][c][i] = 0.f;
  float ssq = 0.f;
  const int frow = warp * RW + lane / LPR, fq = lane % LPR;
  int s = 0; unsigned ph = 0;
  for (int it = 0; it < IT; ++it) {
    mbar_wait(sa(&full[s]), ph);
    const unsigned st = sa(sm + s * STAGE);
    if (MODE != 1) {
      #pragma unroll
      for (int ks = 0; ks < R / 16; ++ks) {
        const int kk = ks * 16;
        const int arow = lane % 16, ach = (kk % 64) / 8 + lane / 16;
        const unsigned aaddr = st + WB + (kk / 64) * XB + arow * 128 + ((ach ^ (arow & 7)) << 4);
        unsigned a0, a1, a2, a3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(aaddr));
        unsigned b[4];
        if (NT == 2) {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8, ch = warp * 2 + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                       : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        } else {
          const int krow = kk + (lane & 15), ch = warp;
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1]) : "r"(st + krow * 128 + ((ch ^ (krow & 7)) << 4)));
        }
        #pragma unroll
        for (int t = 0; t < NT; ++t) {
          float* c = acc[t][ks & 1];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[2 * t]), "r"(b[2 * t + 1]));
        }
      }
      if (MODE != 2) {
        #pragma unroll
        for (int q = fq; q < CPR; q += LPR) {
          const int box = q / 8, c = q % 8;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(st + WB + box * XB + frow * 128 + ((c ^ (frow & 7)) << 4)));
          const __half2* h = reinterpret_cast<const __half2*>(&v);
          #pragma unroll
          for (int e = 0; e < 4; ++e) { const float2 f = __half22float2(h[e]); ssq += f.x * f.x + f.y * f.y; }
        }
      }
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    if (++s == S) { s = 0; ph ^= 1; }
  }
  if (MODE == 1) { if (threadIdx.x == 0 && mrows < 0) out[0] = __float2half(ssq); return; }
  #pragma unroll
  for (int o = LPR / 2; o > 0; o /= 2) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
  if (fq == 0) ss_sh[frow] = ssq;
  asm volatile("bar.sync 1, %0;" :: "n"(NC * 32) : "memory");
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row < mrows) {
      const float inv = MODE == 2 ? 1.f : 1.f / sqrtf(ss_sh[row] / 4096.f);
      #pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int col = c0 + warp * WCOLS + t * 8 + 2 * (lane % 4);
        const float v0 = (acc[t][0][2 * h] + acc[t][1][2 * h]) * inv, v1 = (acc[t][0][2 * h + 1] + acc[t][1][2 * h + 1]) * inv;
        *reinterpret_cast<__half2*>(out + (size_t)row * 6144 + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}
