// The norms in front of the FP8 linears, writing E4M3 for them: the
// normalized result of trellis.gated_residual_norm / layer_norm_modulate
// when its only reader is a static-scale FP8 linear (runtime/cuda/
// Fp8Gemm.cpp), so that the linear needs no quantization pass. The
// generated kernel of the op computes the same expressions with an f16
// result; here each normalized value is rounded to f16 as there, then
// multiplied by the linear's quantize scale and rounded to E4M3
// (fp8_quantize.cuh): what the separate pass would have written.
//
//   residual = f16(x + gate·h)      (gate absent: x + h; h absent: x itself)
//   residual = f16(residual + plus) (with plus)
//   y        = LayerNorm(residual) (biased variance, two passes, f32)
//              · (1 + scale) + shift (modulate) or · weight + bias (affine)
//   out      = E4M3(f16(y) · quantize), residual_out = residual (when asked)
//
// One warp per row, each lane 8 consecutive columns per 16-byte load, VEC
// loads per lane (n <= 256 · VEC), the row kept in registers.
#pragma once

#include "runtime/kernels/fp8_quantize.cuh"
#include "runtime/kernels/norm_e4m3.h"

#include <cuda_fp16.h>
#include <stdint.h>

namespace trellis_norm {

constexpr int kThreads = TRELLIS_NORM_E4M3_THREADS;

__device__ __forceinline__ void load8(const __half *p, float v[8]) {
  const uint4 raw = *reinterpret_cast<const uint4 *>(p);
  const __half2 *h = reinterpret_cast<const __half2 *>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

template <int VEC>
__device__ __forceinline__ void normRowsE4M3(const TrellisNormE4M3Params &p) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * (kThreads / 32) + (threadIdx.x >> 5);
  if (row >= p.rows)
    return;
  const int64_t base = row * p.n;
  const __half *x = static_cast<const __half *>(p.x);
  const __half *hp = static_cast<const __half *>(p.h);
  const __half *gate = static_cast<const __half *>(p.gate);
  const __half *plus = static_cast<const __half *>(p.plus);
  const __half *shift = static_cast<const __half *>(p.shift);
  const __half *scale = static_cast<const __half *>(p.scale);
  uint8_t *out = static_cast<uint8_t *>(p.out);
  __half *residual = static_cast<__half *>(p.residual_out);
  float v[VEC][8];
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    const int64_t c = int64_t(lane + 32 * j) * 8;
    if (c >= p.n)
      continue;
    load8(x + base + c, v[j]);
    if (hp) {
      float h[8], g[8];
      load8(hp + base + c, h);
      if (gate)
        load8(gate + (row / p.gate_rows) * p.n + c, g);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        v[j][i] = __half2float(__float2half_rn(
            __fadd_rn(v[j][i], gate ? __fmul_rn(g[i], h[i]) : h[i])));
    }
    if (plus) {
      float a[8];
      load8(plus + (row / p.plus_rows) * p.n + c, a);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        v[j][i] = __half2float(__float2half_rn(__fadd_rn(v[j][i], a[i])));
    }
#pragma unroll
    for (int i = 0; i < 8; ++i)
      sum += v[j][i];
  }
  const float mean = warpSum(sum) / float(p.n);
  float sq = 0.f;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    if (int64_t(lane + 32 * j) * 8 >= p.n)
      continue;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float d = v[j][i] - mean;
      sq += d * d;
    }
  }
  const float rstd = 1.f / sqrtf(warpSum(sq) / float(p.n) + p.eps);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    const int64_t c = int64_t(lane + 32 * j) * 8;
    if (c >= p.n)
      continue;
    float a[8], b[8];
    if (scale) {
      load8(scale + (row / p.mod_rows) * p.n + c, a);
      load8(shift + (row / p.mod_rows) * p.n + c, b);
    }
    uint4 y16, r16;
    __half2 *y2 = reinterpret_cast<__half2 *>(&y16);
    __half2 *r2 = reinterpret_cast<__half2 *>(&r16);
#pragma unroll
    for (int i = 0; i < 8; i += 2) {
      float y[2];
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        float u = (v[j][i + t] - mean) * rstd;
        if (scale)
          u = __fadd_rn(__fmul_rn(u, __fadd_rn(1.f, a[i + t])), b[i + t]);
        else if (p.weight)
          u = __fadd_rn(__fmul_rn(u, p.weight[c + i + t]), p.bias[c + i + t]);
        y[t] = u;
      }
      y2[i / 2] = __floats2half2_rn(y[0], y[1]);
      r2[i / 2] = __floats2half2_rn(v[j][i], v[j][i + 1]);
    }
    *reinterpret_cast<uint2 *>(out + base + c) =
        trellis_fp8_quantize8(y16, p.quantize);
    if (residual)
      *reinterpret_cast<uint4 *>(residual + base + c) = r16;
  }
}

} // namespace trellis_norm

#define TRELLIS_NORM_E4M3_KERNEL(VEC)                                          \
  extern "C" __global__ void __launch_bounds__(trellis_norm::kThreads)        \
      trellis_norm_e4m3_v##VEC(const __grid_constant__ TrellisNormE4M3Params \
                                   p) {                                        \
    trellis_norm::normRowsE4M3<VEC>(p);                                        \
  }
TRELLIS_NORM_E4M3_KERNEL(1)
TRELLIS_NORM_E4M3_KERNEL(2)
TRELLIS_NORM_E4M3_KERNEL(4)
TRELLIS_NORM_E4M3_KERNEL(8)
