// The row part of trellis.linear_residual_norm (gemm_norm.h) after a cuBLASLt
// GEMM has written h: the path for GPUs without the sm_90a fused kernel and
// for widths it is not built for. One warp per row, two passes over the row
// (mean, then the squared deviations, as the CPU reference's LayerNorm).
#pragma once

#include "runtime/kernels/gemm_norm.h"

#include <cuda_fp16.h>

namespace trellis_gemm {

__device__ __forceinline__ float residual_value(const TrellisGemmNormParams &p,
                                                int64_t row, int64_t vec,
                                                int c) {
  const __half *x = static_cast<const __half *>(p.x);
  const __half *h = static_cast<const __half *>(p.h);
  const __half *gate = static_cast<const __half *>(p.gate);
  const __half *plus = static_cast<const __half *>(p.plus);
  const int64_t i = row * p.n + c;
  const float hv = __half2float(h[i]), xv = __half2float(x[i]);
  float v = __half2float(
      __float2half_rn(gate ? xv + __half2float(gate[vec + c]) * hv : xv + hv));
  if (plus)
    v = __half2float(__float2half_rn(v + __half2float(plus[vec + c])));
  return v;
}

__device__ __forceinline__ void residualNormRows(TrellisGemmNormParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t row =
      int64_t(blockIdx.x) * (TRELLIS_RESIDUAL_NORM_THREADS / 32) +
      (threadIdx.x >> 5);
  if (row >= p.rows)
    return;
  const int64_t vec = (row / p.tokens) * p.n;
  __half *res = static_cast<__half *>(p.residual_out);
  float sum = 0.f;
  for (int c = lane; c < p.n; c += 32) {
    const float v = residual_value(p, row, vec, c);
    sum += v;
  }
  for (int m = 16; m >= 1; m >>= 1)
    sum += __shfl_xor_sync(0xffffffffu, sum, m);
  const float mean = sum / float(p.n);
  float sq = 0.f;
  for (int c = lane; c < p.n; c += 32) {
    const float d = residual_value(p, row, vec, c) - mean;
    sq += d * d;
  }
  for (int m = 16; m >= 1; m >>= 1)
    sq += __shfl_xor_sync(0xffffffffu, sq, m);
  const float rstd = 1.f / sqrtf(sq / float(p.n) + p.eps);
  const __half *shift = static_cast<const __half *>(p.shift);
  const __half *scale = static_cast<const __half *>(p.scale);
  __half *out = static_cast<__half *>(p.out);
  // residual_out may alias x: each column is read and written by one lane.
  for (int c = lane; c < p.n; c += 32) {
    const float v = residual_value(p, row, vec, c);
    float y = (v - mean) * rstd;
    if (scale)
      y = y * (1.f + __half2float(scale[vec + c])) +
          __half2float(shift[vec + c]);
    else if (p.norm_weight)
      y = y * p.norm_weight[c] + p.norm_bias[c];
    res[row * p.n + c] = __float2half_rn(v);
    out[row * p.n + c] = __float2half_rn(y);
  }
}

} // namespace trellis_gemm

#define TRELLIS_RESIDUAL_NORM_DEFINE()                                         \
  extern "C" __global__ void __launch_bounds__(TRELLIS_RESIDUAL_NORM_THREADS)  \
      trellis_residual_norm_rows(                                              \
          const __grid_constant__ TrellisGemmNormParams p) {                   \
    trellis_gemm::residualNormRows(p);                                         \
  }
