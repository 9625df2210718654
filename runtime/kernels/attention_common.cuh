// Device helpers shared by the attention kernel families (sm90 wgmma, sm80/sm75
// mma.sync).
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

#include "runtime/kernels/attention.h"
#include "runtime/kernels/fp8_quantize.cuh"

namespace trellis_attn {

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- global -> shared copies
// ------------------------------------------------------------------ 16-byte
// copy; pred == false writes zeros (rows past a sequence's end). On sm_80+
// asynchronous (cp.async, L2 only), on sm_75 a plain synchronous load + store.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void *src,
                                            bool pred) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int size = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(src), "r"(size)
               : "memory");
#else
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (pred)
    v = __ldg(reinterpret_cast<const uint4 *>(src));
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// Makes generic-proxy writes to shared memory (cp.async, st.shared) visible to
// the async proxy (wgmma operand reads). Each writing thread runs it before the
// barrier that publishes the data.
__device__ __forceinline__ void fence_proxy_async_smem() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}
__device__ __forceinline__ void sts128(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ void sts32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&h);
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// ---- shared-memory tile layouts (byte offset of 16-byte chunk c of row r)
// ---------------------- The swizzled layouts wgmma reads (W = 128, 64 or 32
// bytes): the tile is split into column blocks of W bytes (W/2 halves); each
// block is ROWS x W bytes, and 16-byte chunk ci of row r lands at chunk ci ^
// (address bits 7.. of the row), i.e. CUTLASS's Swizzle<log2(W/16), 4, 3>. W =
// 128: chunk c ^ (r & 7). Needs a base aligned to 8 * W bytes (1024 suffices).
template <int W, int ROWS> struct SwizzleW {
  static constexpr int kChunksPerRow = W / 16;
  static __device__ __forceinline__ uint32_t off(int r, int c) {
    const int blk = c / kChunksPerRow, ci = c % kChunksPerRow;
    const int phase = ((r * W) >> 7) & (kChunksPerRow - 1);
    return static_cast<uint32_t>(blk * (ROWS * W) + r * W +
                                 ((ci ^ phase) << 4));
  }
};
template <int ROWS> using Swizzle128 = SwizzleW<128, ROWS>;
// Rows padded by 16 bytes: 8 consecutive rows hit 8 distinct 16-byte bank
// groups for ldmatrix.
template <int D> struct Padded {
  static constexpr int kRowBytes = (D + 8) * 2;
  static __device__ __forceinline__ uint32_t off(int r, int c) {
    return static_cast<uint32_t>(r * kRowBytes + c * 16);
  }
};

// Copies ROWS x D halves starting at row `row0` of a sequence (valid rows <
// len) into a tile.
template <int ROWS, int D, int THREADS, class Layout>
__device__ __forceinline__ void load_tile(uint32_t tile, const __half *base,
                                          int64_t row_stride, int row0, int len,
                                          int tid) {
  constexpr int kChunks = D / 8;
  constexpr int kTotal = ROWS * kChunks;
#pragma unroll
  for (int i0 = 0; i0 < kTotal; i0 += THREADS) {
    const int i = i0 + tid;
    if (kTotal % THREADS == 0 || i < kTotal) {
      const int r = i / kChunks, c = i % kChunks;
      const int row = row0 + r;
      const bool ok = row < len;
      const __half *src =
          base + (ok ? static_cast<int64_t>(row) * row_stride + c * 8 : 0);
      cp_async_16(tile + Layout::off(r, c), src, ok);
    }
  }
}

// Streams ROWS x D tiles of one sequence into shared memory, tile after tile
// (tile t covers rows t·ROWS ..), as load_tile does: the per-thread source
// pointer and tile offsets are set up once, each call copies one tile and
// advances, and only a tile that reaches past the sequence end checks its
// rows (zero-filling the rest). Calls come in tile order, one per tile.
template <int ROWS, int D, int THREADS, class Layout> struct TileStream {
  static constexpr int kChunks = D / 8;
  static constexpr int kTotal = ROWS * kChunks;
  static constexpr int kIters = (kTotal + THREADS - 1) / THREADS;
  static constexpr int kRowStep = THREADS / kChunks;
  const __half *seq;  // row 0 of the sequence (the address of empty copies)
  const __half *next; // this thread's first chunk in the next tile
  int64_t row_step;   // elements between this thread's rows in a tile
  int64_t tile_step;  // elements from one tile to the next
  int r, start, len;  // this thread's first row in a tile; the tile's; the end
  uint32_t off[kIters];

  __device__ __forceinline__ TileStream(const __half *base, int64_t row_stride,
                                        int len_, int tid)
      : seq(base), row_step(int64_t(kRowStep) * row_stride),
        tile_step(int64_t(ROWS) * row_stride), r(tid / kChunks), start(0),
        len(len_) {
    const int c = tid % kChunks;
    next = base + static_cast<int64_t>(r) * row_stride + c * 8;
#pragma unroll
    for (int i = 0; i < kIters; ++i)
      off[i] = Layout::off(r + i * kRowStep, c);
  }
  // Copies the next tile into `tile` (cp.async) and advances.
  __device__ __forceinline__ void load(uint32_t tile) {
    const bool full = start + ROWS <= len;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      if (kTotal % THREADS != 0 && r + i * kRowStep >= ROWS)
        continue;
      const bool ok = full || start + r + i * kRowStep < len;
      cp_async_16(tile + off[i], ok ? next + i * row_step : seq, ok);
    }
    next += tile_step;
    start += ROWS;
  }
};

// Head RMS norm (spec §3.6), per row of D halves, fp32 math, fp16 result:
//   u' = fp16( (u * (1 / max(||u||, 1e-12))) * gamma[:] * sqrt(D) )
// TRELLIS divides by the norm; multiplying by the correctly rounded reciprocal
// differs by at most one fp32 ulp before the fp16 rounding (as do
// reduction-order differences in ||u||).
__device__ __forceinline__ uint4 rmsnorm_chunk(uint4 v, float inv,
                                               const float (&g)[8],
                                               float sqrt_d) {
  const __half2 *hv = reinterpret_cast<const __half2 *>(&v);
  uint4 r;
  uint32_t *w = reinterpret_cast<uint32_t *>(&r);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 f = __half22float2(hv[e]);
    w[e] = pack_half2(f.x * inv * g[2 * e] * sqrt_d,
                      f.y * inv * g[2 * e + 1] * sqrt_d);
  }
  return r;
}
__device__ __forceinline__ float sumsq_chunk(uint4 v) {
  const __half2 *hv = reinterpret_cast<const __half2 *>(&v);
  float ss = 0.f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 f = __half22float2(hv[e]);
    ss = fmaf(f.x, f.x, ss);
    ss = fmaf(f.y, f.y, ss);
  }
  return ss;
}
__device__ __forceinline__ float rms_inv(float ss) {
  return __frcp_rn(fmaxf(sqrtf(ss), 1e-12f));
}

// True when every thread can normalize exactly the 16-byte chunks it copied
// with load_tile (the D/8 chunks of a row sit in D/8 consecutive lanes of one
// warp): no barrier needed between the copy and the normalization, only the
// thread's own cp.async wait.
template <int D> constexpr bool kRmsOwnChunks = (32 % (D / 8)) == 0;

// In-place head RMS norm of a ROWS x D tile loaded by load_tile<ROWS, D,
// THREADS, Layout>. kRmsOwnChunks<D>: each thread handles its own chunks (call
// after its cp_async_wait); otherwise: TPR lanes per row over all rows (call
// after a barrier that publishes the tile). Rows past the data are zeros and
// stay zeros.
template <int ROWS, int D, int THREADS, class Layout>
__device__ __forceinline__ void
rmsnorm_tile(uint32_t tile, const float *__restrict__ gamma, int tid) {
  constexpr int kChunks = D / 8;
  const float sqrt_d = sqrtf(static_cast<float>(D));
  if constexpr (kRmsOwnChunks<D>) {
    constexpr int kTotal = ROWS * kChunks;
    static_assert(THREADS % kChunks == 0, "threads");
    const int c = tid % kChunks; // the same chunk column in every pass
    float g[8];
    {
      const float4 g0 = __ldg(reinterpret_cast<const float4 *>(gamma + c * 8));
      const float4 g1 =
          __ldg(reinterpret_cast<const float4 *>(gamma + c * 8 + 4));
      g[0] = g0.x, g[1] = g0.y, g[2] = g0.z, g[3] = g0.w, g[4] = g1.x,
      g[5] = g1.y, g[6] = g1.z, g[7] = g1.w;
    }
#pragma unroll
    for (int i0 = 0; i0 < kTotal; i0 += THREADS) {
      const int i = i0 + tid;
      const bool active = (kTotal % THREADS == 0) || i < kTotal;
      const int r = i / kChunks;
      const uint32_t a = tile + Layout::off(r, c);
      const uint4 v = active ? lds128(a) : make_uint4(0u, 0u, 0u, 0u);
      float ss = sumsq_chunk(v);
#pragma unroll
      for (int m = 1; m < kChunks; m <<= 1)
        ss += __shfl_xor_sync(0xffffffffu, ss, m);
      if (active)
        sts128(a, rmsnorm_chunk(v, rms_inv(ss), g, sqrt_d));
    }
  } else {
    constexpr int TPR = (kChunks % 4 == 0) ? 4 : 2;
    constexpr int kPer = kChunks / TPR;
    constexpr int kRowsPerPass = THREADS / TPR;
    static_assert(kChunks % TPR == 0, "head_dim");
    const int part = tid % TPR;
    for (int r0 = 0; r0 < ROWS; r0 += kRowsPerPass) {
      const int r = r0 + tid / TPR;
      const bool active = r < ROWS;
      uint4 v[kPer];
      float ss = 0.f;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        v[i] = active ? lds128(tile + Layout::off(r, part + i * TPR))
                      : make_uint4(0u, 0u, 0u, 0u);
        ss += sumsq_chunk(v[i]);
      }
      ss += __shfl_xor_sync(0xffffffffu, ss, 1);
      if (TPR == 4)
        ss += __shfl_xor_sync(0xffffffffu, ss, 2);
      const float inv = rms_inv(ss);
      if (active) {
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          const int c = part + i * TPR;
          const float4 g0 =
              __ldg(reinterpret_cast<const float4 *>(gamma + c * 8));
          const float4 g1 =
              __ldg(reinterpret_cast<const float4 *>(gamma + c * 8 + 4));
          const float g[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
          sts128(tile + Layout::off(r, c), rmsnorm_chunk(v[i], inv, g, sqrt_d));
        }
      }
    }
  }
}

// ---- sequences
// -------------------------------------------------------------------------------
struct Seq {
  const __half *ptr; // row 0 of this sequence, this head
  int len;
};
__device__ __forceinline__ Seq make_seq(const void *base, const int32_t *cu,
                                        int64_t batch_stride,
                                        int64_t row_stride, int64_t head_stride,
                                        int dense_len, int b, int h) {
  int64_t off;
  int len;
  if (cu != nullptr) {
    const int s = __ldg(cu + b), e = __ldg(cu + b + 1);
    off = static_cast<int64_t>(s) * row_stride;
    len = e - s;
  } else {
    off = static_cast<int64_t>(b) * batch_stride;
    len = dense_len;
  }
  return Seq{static_cast<const __half *>(base) + off +
                 static_cast<int64_t>(h) * head_stride,
             len};
}

// Stores ROWS x D halves from a shared tile as E4M3 (each value times
// `quantize`, saturating) to rows row0.. of an E4M3 O (valid rows < len):
// 8 values per 16-byte shared load, one 8-byte global store.
template <int ROWS, int D, int THREADS, class Layout>
__device__ __forceinline__ void store_tile_e4m3(uint32_t tile, uint8_t *base,
                                                int64_t row_stride, int row0,
                                                int len, int tid,
                                                float quantize) {
  constexpr int kChunks = D / 8;
  constexpr int kTotal = ROWS * kChunks;
#pragma unroll
  for (int i0 = 0; i0 < kTotal; i0 += THREADS) {
    const int i = i0 + tid;
    if (kTotal % THREADS == 0 || i < kTotal) {
      const int r = i / kChunks, c = i % kChunks;
      const int row = row0 + r;
      if (row < len)
        *reinterpret_cast<uint2 *>(base + static_cast<int64_t>(row) *
                                              row_stride +
                                   c * 8) =
            trellis_fp8_quantize8(lds128(tile + Layout::off(r, c)), quantize);
    }
  }
}

// Stores ROWS x D halves from a shared tile to rows row0.. of O (valid rows <
// len).
template <int ROWS, int D, int THREADS, class Layout>
__device__ __forceinline__ void store_tile(uint32_t tile, __half *base,
                                           int64_t row_stride, int row0,
                                           int len, int tid) {
  constexpr int kChunks = D / 8;
  constexpr int kTotal = ROWS * kChunks;
#pragma unroll
  for (int i0 = 0; i0 < kTotal; i0 += THREADS) {
    const int i = i0 + tid;
    if (kTotal % THREADS == 0 || i < kTotal) {
      const int r = i / kChunks, c = i % kChunks;
      const int row = row0 + r;
      if (row < len) {
        const uint4 v = lds128(tile + Layout::off(r, c));
        *reinterpret_cast<uint4 *>(
            base + static_cast<int64_t>(row) * row_stride + c * 8) = v;
      }
    }
  }
}

} // namespace trellis_attn
