// Standalone head RMS norm (spec §3.6) over a token-major [rows, heads,
// head_dim] fp16 view:
//   y[r, h, :] = fp16( x[r, h, :] * (1 / max(||x[r, h, :]||, 1e-12)) * gamma[h,
//   :] * sqrt(D) )
// Memory-bound pre-pass, the alternative to the attention kernels' fused
// prologue when the same K would otherwise be normalized by every query tile
// (see attention.h). In place when y == x.
#pragma once

#include "runtime/kernels/attention_common.cuh"

namespace trellis_attn {

template <int D>
__device__ __forceinline__ void
head_rmsnorm(const TrellisHeadRmsNormParams &p) {
  constexpr int kChunks = D / 8;
  constexpr int TPR = TRELLIS_HEAD_RMSNORM_TPR(D); // lanes per (row, head)
  constexpr int kPer = kChunks / TPR;
  static_assert(kChunks % TPR == 0 && 32 % TPR == 0, "head_dim");
  const int64_t t =
      static_cast<int64_t>(blockIdx.x) * TRELLIS_HEAD_RMSNORM_THREADS +
      threadIdx.x;
  const int64_t group = t / TPR;
  const int part = static_cast<int>(t % TPR);
  const int64_t total = static_cast<int64_t>(p.rows) * p.heads;
  const bool active = group < total; // inactive lanes still join the shuffles
  const int64_t row = active ? group / p.heads : 0;
  const int h = active ? static_cast<int>(group % p.heads) : 0;
  const __half *x = static_cast<const __half *>(p.x) + row * p.x_row_stride +
                    h * p.x_head_stride;
  __half *y =
      static_cast<__half *>(p.y) + row * p.y_row_stride + h * p.y_head_stride;
  uint4 v[kPer];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    v[i] = active ? *reinterpret_cast<const uint4 *>(x + (part + i * TPR) * 8)
                  : make_uint4(0u, 0u, 0u, 0u);
    ss += sumsq_chunk(v[i]);
  }
#pragma unroll
  for (int m = 1; m < TPR; m <<= 1)
    ss += __shfl_xor_sync(0xffffffffu, ss, m);
  if (!active)
    return;
  const float inv = rms_inv(ss);
  const float sqrt_d = sqrtf(static_cast<float>(D));
  const float *g = p.gamma + h * D;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int c = part + i * TPR;
    const float4 g0 = __ldg(reinterpret_cast<const float4 *>(g + c * 8));
    const float4 g1 = __ldg(reinterpret_cast<const float4 *>(g + c * 8 + 4));
    const float gg[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
    *reinterpret_cast<uint4 *>(y + c * 8) =
        rmsnorm_chunk(v[i], inv, gg, sqrt_d);
  }
}

} // namespace trellis_attn

#define TRELLIS_HEAD_RMSNORM_DEFINE(D)                                         \
  extern "C" __global__ void __launch_bounds__(TRELLIS_HEAD_RMSNORM_THREADS)   \
      trellis_head_rmsnorm_d##D(                                               \
          const __grid_constant__ TrellisHeadRmsNormParams p) {                \
    trellis_attn::head_rmsnorm<D>(p);                                          \
  }
