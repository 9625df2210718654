// FP8 (E4M3) quantization for the W8A8 GEMMs of `trellis.linear {precision =
// "fp8_e4m3"}` (runtime/cuda/DenseCommands.cpp): the per-tensor amax of an
// f16 tensor, then its E4M3 copy scaled so that amax maps to 448. The CPU
// reference's model is include/trellis/Reference/Fp8.h: quantize scale
// 448 / amax and dequantize scale amax / 448 (IEEE fp32 divisions), one fp32
// multiply per value, then the saturating round-to-nearest-even conversion
// (cvt.rn.satfinite.e4m3x2.f32); amax 0 gives scales of 1. sm_89+.
#pragma once

#include "runtime/kernels/fp8_quantize.cuh"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

// *amax = max |x[i]| (atomicMax on the bits: non-negative floats order as
// their int bits; the caller zeroes *amax first). NaNs are skipped (fmaxf).
// With `running` (calibration, trellis.exe --calibrate): also raised to
// that amax, never zeroed by the caller, so it holds the largest of every
// call.
extern "C" __global__ void trellis_fp8_amax_f16(const __half *x,
                                                unsigned long long n,
                                                float *amax, float *running) {
  float m = 0.f;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t first = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  const uint4 *x8 = reinterpret_cast<const uint4 *>(x);
  for (size_t i = first; i < n / 8; i += stride) {
    uint4 raw = x8[i];
    const __half2 *h = reinterpret_cast<const __half2 *>(&raw);
    for (int j = 0; j < 4; ++j) {
      float2 v = __half22float2(h[j]);
      m = fmaxf(m, fmaxf(fabsf(v.x), fabsf(v.y)));
    }
  }
  for (size_t i = n / 8 * 8 + first; i < n; i += stride)
    m = fmaxf(m, fabsf(__half2float(x[i])));
  for (int o = 16; o; o >>= 1)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  __shared__ float warps[32];
  if ((threadIdx.x & 31) == 0)
    warps[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < blockDim.x / 32 ? warps[threadIdx.x] : 0.f;
    for (int o = 16; o; o >>= 1)
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x == 0 && isfinite(m)) {
      atomicMax(reinterpret_cast<int *>(amax), __float_as_int(m));
      if (running)
        atomicMax(reinterpret_cast<int *>(running), __float_as_int(m));
    }
  }
}

// q[i] = E4M3(x[i] · s) over a grid-stride loop: eight values per thread and
// step (a 16-byte load, an 8-byte store), then the tail one by one.
__device__ __forceinline__ void trellis_fp8_quantize_all(const __half *x,
                                                         unsigned long long n,
                                                         float s,
                                                         __nv_fp8_e4m3 *q) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t first = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  const uint4 *x8 = reinterpret_cast<const uint4 *>(x);
  uint2 *q8 = reinterpret_cast<uint2 *>(q);
  for (size_t i = first; i < n / 8; i += stride)
    q8[i] = trellis_fp8_quantize8(x8[i], s);
  for (size_t i = n / 8 * 8 + first; i < n; i += stride)
    q[i] = __nv_fp8_e4m3(__fmul_rn(__half2float(x[i]), s));
}

// q[i] = E4M3(x[i] · (448 / amax)); *dequant = amax / 448 (1 and 1 when
// amax is 0).
extern "C" __global__ void
trellis_fp8_quantize_f16(const __half *x, unsigned long long n,
                         const float *amax, __nv_fp8_e4m3 *q, float *dequant) {
  const float a = *amax;
  const float s = a > 0.f ? 448.f / a : 1.f;
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *dequant = a > 0.f ? a / 448.f : 1.f;
  trellis_fp8_quantize_all(x, n, s, q);
}

// A static scale (trellis.linear's activation_amax): q[i] = E4M3(x[i] ·
// quantize), quantize = 448 / amax computed on the host as the reference
// does; one pass, no amax. Values beyond amax saturate at ±448.
extern "C" __global__ void
trellis_fp8_quantize_static_f16(const __half *x, unsigned long long n,
                                float quantize, __nv_fp8_e4m3 *q) {
  trellis_fp8_quantize_all(x, n, quantize, q);
}
