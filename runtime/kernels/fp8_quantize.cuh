// The E4M3 conversion every FP8 producer shares (runtime/kernels/fp8.cuh's
// quantization kernels, the attention kernels' E4M3 epilogue): f16 values
// times a quantize scale (one fp32 multiply each), rounded to E4M3 to
// nearest even, saturating (cvt.rn.satfinite.e4m3x2.f32 on sm_89+) — the
// CPU reference's quantizeE4M3 (include/trellis/Reference/Fp8.h).
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <stdint.h>

// Eight f16 values (one 16-byte load) to E4M3 at scale s (an 8-byte store).
__device__ __forceinline__ uint2 trellis_fp8_quantize8(uint4 raw, float s) {
  const __half2 *h = reinterpret_cast<const __half2 *>(&raw);
  float2 v0 = __half22float2(h[0]), v1 = __half22float2(h[1]);
  float2 v2 = __half22float2(h[2]), v3 = __half22float2(h[3]);
  __nv_fp8x4_e4m3 lo(make_float4(__fmul_rn(v0.x, s), __fmul_rn(v0.y, s),
                                 __fmul_rn(v1.x, s), __fmul_rn(v1.y, s)));
  __nv_fp8x4_e4m3 hi(make_float4(__fmul_rn(v2.x, s), __fmul_rn(v2.y, s),
                                 __fmul_rn(v3.x, s), __fmul_rn(v3.y, s)));
  return make_uint2(*reinterpret_cast<uint32_t *>(&lo),
                    *reinterpret_cast<uint32_t *>(&hi));
}
