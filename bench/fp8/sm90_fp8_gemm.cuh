// A first FP8 (E4M3) GEMM for Hopper (sm_90a), measured against cuBLASLt by
// gemm_fp8_probe.cu (not used by the runtime: it is slower, BASELINE.md):
//   out[m, n] = fp16(s_x s_w sum_k x[m, k] w[n, k] + bias[n] [+ residual])
// x [M, K] and w [N, K] row-major E4M3 (K contiguous), per-tensor scales as
// device floats.
//
// One CTA per 128 x BN tile of out (grid N / BN x ceil(M / 128)):
//   warpgroup 0      producer: one thread issues the TMA loads of x (128 x
//                    128 bytes) and w (BN x 128 bytes) into a STAGES-deep
//                    ring (128-byte swizzle, the layout wgmma reads);
//   warpgroups 1, 2  consumers: 64 rows each, wgmma m64nBNk32 from shared
//                    memory into one fp32 accumulator fragment over all of K
//                    (no promotion: Hopper's FP8 MMA adds with fewer bits
//                    than fp32, which shows at K = 4096), then the epilogue
//                    from registers.
// K must be a multiple of 128 and N of BN; rows past M are TMA's zeros and
// are not stored. The K loop is runtime/kernels/tma_wgmma_ring.cuh's.
#pragma once

#include "runtime/kernels/tma_wgmma_ring.cuh"

#include <cuda.h>

#include <stdint.h>

struct TrellisGemmFp8Params {
  const float *scale_x, *scale_w; // device scalars
  const void *bias;               // fp16 [n] or null
  const void *residual;           // fp16 [m, n] or null
  void *out;                      // fp16 [m, n]
  int32_t m, n, k;
};

#define TRELLIS_GEMM_FP8_BM 128
#define TRELLIS_GEMM_FP8_BK 128
#define TRELLIS_GEMM_FP8_THREADS 384
// Dynamic shared memory: 1 KiB alignment slack, the stages, the barriers.
#define TRELLIS_GEMM_FP8_SMEM(BN, ST)                                          \
  (1024 + (ST) * (TRELLIS_GEMM_FP8_BM + (BN)) * TRELLIS_GEMM_FP8_BK + 16 * (ST))

namespace trellis_gemm {

template <int BN, int STAGES>
__device__ __forceinline__ void gemmFp8Sm90(const CUtensorMap *mapX,
                                            const CUtensorMap *mapW,
                                            const TrellisGemmFp8Params &p) {
  constexpr int BM = TRELLIS_GEMM_FP8_BM, BK = TRELLIS_GEMM_FP8_BK;
  constexpr int kXBytes = BM * BK, kWBytes = BN * BK;
  constexpr int kStageBytes = kXBytes + kWBytes;

  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  // one arrival per consumer warp gives a stage back
  const TmaWgmmaRing<STAGES, 8> ring{base, kStageBytes,
                                     base + STAGES * kStageBytes};

  const int tid = threadIdx.x;
  const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
  const int m0 = int(blockIdx.y) * BM, n0 = int(blockIdx.x) * BN;
  const int ksteps = p.k / BK;

  if (tid == 0)
    ring.init();
  __syncthreads();

  if (wg == 0) {
    // Producer warpgroup. Its registers go to the consumers.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (tid == 0)
      ring.produce(ksteps, [&](int kt, uint32_t dst, uint32_t full) {
        tma_load_2d(dst, mapX, kt * BK, m0, full);
        tma_load_2d(dst + kXBytes, mapW, kt * BK, n0, full);
      });
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");

  const int cw = wg - 1; // consumer warpgroup: rows 64 cw .. 64 cw + 63
  const int lane = tid & 31, warp = (tid >> 5) & 3;
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i)
    acc[i] = 0.f;

  const uint64_t descX0 = smem_desc<128>(base + cw * (64 * BK), 16, 1024);
  const uint64_t descW0 = smem_desc<128>(base + kXBytes, 16, 1024);
  ring.consume(ksteps, lane, [&](uint64_t stage) {
#pragma unroll
    for (int kk = 0; kk < BK / 32; ++kk) // 32 bytes (k32) per wgmma
      wgmma_ss_e4m3<BN>(acc, descX0 + stage + kk * 2, descW0 + stage + kk * 2,
                        1);
  });
  fence_regs<BN / 2>(acc);

  // Accumulator fragment: acc[4j + 2i + e] is row 64 cw + 16 warp + lane/4 +
  // 8i, column n0 + 8j + 2 (lane % 4) + e.
  const float scale = __ldg(p.scale_x) * __ldg(p.scale_w);
  const int r0 = m0 + cw * 64 + warp * 16 + (lane >> 2);
  const int c0 = n0 + 2 * (lane & 3);
  const __half2 *bias = reinterpret_cast<const __half2 *>(p.bias);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = r0 + 8 * i;
    if (row >= p.m)
      continue;
    const int64_t at = int64_t(row) * p.n + c0;
    __half2 *out =
        reinterpret_cast<__half2 *>(static_cast<__half *>(p.out) + at);
    const __half2 *res = p.residual
                             ? reinterpret_cast<const __half2 *>(
                                   static_cast<const __half *>(p.residual) + at)
                             : nullptr;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      float v0 = acc[4 * j + 2 * i] * scale,
            v1 = acc[4 * j + 2 * i + 1] * scale;
      if (bias) {
        const float2 b = __half22float2(__ldg(bias + (c0 + 8 * j) / 2));
        v0 += b.x;
        v1 += b.y;
      }
      if (res) {
        const float2 r = __half22float2(res[4 * j]);
        v0 += r.x;
        v1 += r.y;
      }
      out[4 * j] = __floats2half2_rn(v0, v1);
    }
  }
}

} // namespace trellis_gemm

#define TRELLIS_GEMM_FP8_SM90_DEFINE(BN, ST)                                   \
  extern "C" __global__ void __launch_bounds__(TRELLIS_GEMM_FP8_THREADS, 1)    \
      trellis_gemm_fp8_sm90_n##BN##_s##ST(                                     \
          const __grid_constant__ CUtensorMap mapX,                            \
          const __grid_constant__ CUtensorMap mapW,                            \
          const __grid_constant__ TrellisGemmFp8Params p) {                    \
    trellis_gemm::gemmFp8Sm90<BN, ST>(&mapX, &mapW, p);                        \
  }
