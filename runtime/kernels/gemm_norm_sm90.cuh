// GEMM + residual + LayerNorm in one kernel for Hopper (sm_90a): the end of an
// adaLN block's sub-layer (out = LN(x + gate * (a W^T + bias))), see
// gemm_norm.h for the exact math.
//
// Why one kernel: the row op after a GEMM with n = 1024 outputs read h and x
// and wrote the residual and the normalized rows (32 MB per 4096 rows) after
// the GEMM wrote h (8 MB); here h never leaves the registers, and the LayerNorm
// needs no second pass over the residual.
//
// A row's n columns are spread over a cluster of n / 256 CTAs (blockIdx.x =
// the CTA's rank = its 256-column slice), each computing a 128 x 256 tile:
//   warpgroup 0      producer: one thread issues the TMA loads of A (128 x 64)
//                    and W (256 x 64) into a STAGES-deep ring (128-byte
//                    swizzle, the layout wgmma reads), full/empty mbarriers;
//   warpgroups 1, 2  consumers: 64 rows each, wgmma m64n256k16 from shared
//                    memory, fp32 accumulators (128 per thread).
// Epilogue (consumers): h, the residual v and the CTA's per-row statistics
// (mean and sum of squared deviations of its 256 values, two passes over
// registers) are computed in registers; the statistics are exchanged through
// distributed shared memory (one cluster barrier) and combined exactly
// (Chan et al.: M2 = sum M2_i + 256 sum (mean_i - mean)^2), then each CTA
// normalizes and stores its own slice.
#pragma once

#include "runtime/kernels/gemm_norm.h"
#include "runtime/kernels/tma_wgmma_ring.cuh"

#include <cuda.h>

namespace trellis_gemm {

using namespace trellis_attn;

__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/// The same shared-memory offset in the CTA of cluster rank `rank`.
__device__ __forceinline__ float2 ld_cluster_f2(uint32_t addr, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(addr), "r"(rank));
  float2 v;
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];\n"
               : "=f"(v.x), "=f"(v.y)
               : "r"(remote)
               : "memory");
  return v;
}
__device__ __forceinline__ float2 round_half2(float lo, float hi) {
  return __half22float2(__floats2half2_rn(lo, hi));
}

__device__ __forceinline__ float2 lds_half2(uint32_t addr) {
  const uint32_t v = lds32(addr);
  return __half22float2(*reinterpret_cast<const __half2 *>(&v));
}
__device__ __forceinline__ float2 lds_float2(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n"
               : "=f"(v.x), "=f"(v.y)
               : "r"(addr));
  return v;
}

template <int CLUSTER>
__device__ __forceinline__ void
gemmNormSm90(const CUtensorMap *mapA, const CUtensorMap *mapW,
             const CUtensorMap *mapX, const TrellisGemmNormParams &p) {
  constexpr int BM = TRELLIS_GEMM_NORM_BM, BN = TRELLIS_GEMM_NORM_BN;
  constexpr int BK = TRELLIS_GEMM_NORM_BK, STAGES = TRELLIS_GEMM_NORM_STAGES;
  constexpr int kABytes = BM * BK * 2, kWBytes = BN * BK * 2;
  constexpr int kStageBytes = kABytes + kWBytes;
  constexpr int kSlabBytes = BM * 128; // x: 64 columns x BM rows, swizzled
  constexpr int N = CLUSTER * BN;

  // Shared memory: the stages, x's tile, the column vectors, the barriers
  // (full[s], empty[s], epilogue), the row statistics.
  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t vecs = base + STAGES * kStageBytes;
  const uint32_t sBias = vecs, sGate = vecs + 2 * BN, sPlus = vecs + 4 * BN,
                 sShift = vecs + 6 * BN, sScale = vecs + 8 * BN,
                 sNormW = vecs + 10 * BN, sNormB = vecs + 14 * BN;
  const uint32_t bars = vecs + 18 * BN;
  const uint32_t epi = bars + 16 * STAGES;
  const uint32_t stats = bars + 128; // float2 [BM]
  // one arrival per consumer warp gives a stage back
  const TmaWgmmaRing<STAGES, 8> ring{base, kStageBytes, bars};

  const int tid = threadIdx.x;
  const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
  const int64_t m0 = int64_t(blockIdx.y) * BM;
  const int n0 = int(blockIdx.x) * BN; // == cluster rank * BN
  const int ksteps = p.k / BK;         // >= STAGES (checked by the host)
  // x's tile: four 64-column slabs, three in stage xStage0 and one in
  // xStage1, the stages whose last k steps come before the last two.
  const int lastStage = (ksteps - 1) % STAGES;
  const int xStage0 = (lastStage + 1) % STAGES,
            xStage1 = (lastStage + 2) % STAGES;
  auto xSlab = [&](int slab) {
    return slab < 3 ? base + xStage0 * kStageBytes + slab * kSlabBytes
                    : base + xStage1 * kStageBytes;
  };
  const int64_t vec = (m0 / p.tokens) * N; // the sample's [n] vectors

  if (tid == 0) {
    ring.init();
    mbar_init(epi, 1 + 96); // x's TMA + the vector loaders
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    // Producer warpgroup. Its registers go to the consumers.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (tid == 0) {
      ring.produce(ksteps, [&](int kt, uint32_t dst, uint32_t full) {
        tma_load_2d(dst, mapA, kt * BK, int(m0), full);
        tma_load_2d(dst + kABytes, mapW, kt * BK, n0, full);
      });
      // x's tile, once the consumers have given back the two stages for the
      // last time (use u of stage s completes phase u of empty[s]).
      for (int s : {xStage0, xStage1}) {
        const int uses = (ksteps - s + STAGES - 1) / STAGES;
        mbar_wait(ring.empty(s), (uses - 1) & 1);
      }
      mbar_expect_tx(epi, BM * BN * 2);
      for (int slab = 0; slab < BN / 64; ++slab)
        tma_load_2d(xSlab(slab), mapX, n0 + 64 * slab, int(m0), epi);
    } else if (tid >= 32) {
      // The CTA's slices of the column vectors (absent ones are not read).
      const __half *hv[5] = {static_cast<const __half *>(p.bias),
                             static_cast<const __half *>(p.gate),
                             static_cast<const __half *>(p.plus),
                             static_cast<const __half *>(p.shift),
                             static_cast<const __half *>(p.scale)};
      const uint32_t hs[5] = {sBias, sGate, sPlus, sShift, sScale};
      for (int i = tid - 32; i < BN / 2; i += 96) {
#pragma unroll
        for (int v = 0; v < 5; ++v)
          if (hv[v])
            sts32(hs[v] + 4 * i, *reinterpret_cast<const uint32_t *>(
                                     hv[v] + (v == 0 ? 0 : vec) + n0 + 2 * i));
        if (p.norm_weight) {
          const float2 w =
              *reinterpret_cast<const float2 *>(p.norm_weight + n0 + 2 * i);
          const float2 b =
              *reinterpret_cast<const float2 *>(p.norm_bias + n0 + 2 * i);
          asm volatile(
              "st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(sNormW + 8 * i),
              "f"(w.x), "f"(w.y)
              : "memory");
          asm volatile(
              "st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(sNormB + 8 * i),
              "f"(b.x), "f"(b.y)
              : "memory");
        }
      }
      mbar_arrive(epi);
    }
    // Done: the cluster barriers below wait only for threads that have not
    // exited, and no other CTA reads this warpgroup's state.
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");

  const int cw = wg - 1; // consumer warpgroup: rows 64 cw .. 64 cw + 63
  const int lane = tid & 31, warp = (tid >> 5) & 3;
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i)
    acc[i] = 0.f;

  const uint64_t descA0 = smem_desc<128>(base + cw * (64 * 128), 16, 1024);
  const uint64_t descW0 = smem_desc<128>(base + kABytes, 16, 1024);
  ring.consume(ksteps, lane, [&](uint64_t stage) {
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)
      wgmma_ss<BN>(acc, descA0 + stage + kk * 2, descW0 + stage + kk * 2, 1);
  });
  fence_regs<BN / 2>(acc);
  mbar_wait(epi, 0);

  // Accumulator fragment: acc[4j + 2i + e] is row 64 cw + 16 warp + lane/4 +
  // 8i, column n0 + 8j + 2 (lane % 4) + e.
  const int rl0 = cw * 64 + warp * 16 + (lane >> 2); // local rows rl0, rl0 + 8
  const int q = lane & 3;
  const bool gated = p.gate != nullptr, plus = p.plus != nullptr;
  bool live[2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
    live[i] = m0 + rl0 + 8 * i < p.rows;
  // x's element (local row r, column 8j + 2q) in the swizzled tile.
  auto xAddr = [&](int r, int j) {
    return xSlab(j >> 3) + r * 128 + (((j & 7) ^ (r & 7)) << 4) + 4 * q;
  };

  // v = fp16(x + gate * fp16(acc + bias)) [+ plus], in place of acc.
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const uint32_t cOff = 4 * (4 * j + q); // byte offset of column 8j + 2q
    const float2 b = lds_half2(sBias + cOff);
    const float2 g = gated ? lds_half2(sGate + cOff) : make_float2(1.f, 1.f);
    const float2 pl = plus ? lds_half2(sPlus + cOff) : make_float2(0.f, 0.f);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float2 xv = lds_half2(xAddr(rl0 + 8 * i, j));
      float *a = acc + 4 * j + 2 * i;
      // Pairs rounded with one packed conversion each (F2FP), not two
      // scalar F2F: the roundings were a third of the epilogue.
      const float2 h = round_half2(a[0] + b.x, a[1] + b.y);
      float2 v = gated ? round_half2(xv.x + g.x * h.x, xv.y + g.y * h.y)
                       : round_half2(xv.x + h.x, xv.y + h.y);
      if (plus)
        v = round_half2(v.x + pl.x, v.y + pl.y);
      a[0] = v.x;
      a[1] = v.y;
    }
  }
  // The residual out (this CTA's slice).
  __half *resOut = static_cast<__half *>(p.residual_out);
  const int cq = n0 + 2 * q;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (!live[i])
      continue;
    const int64_t row = m0 + rl0 + 8 * i;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
      *reinterpret_cast<__half2 *>(resOut + row * N + cq + 8 * j) =
          __floats2half2_rn(acc[4 * j + 2 * i], acc[4 * j + 2 * i + 1]);
  }

  // The slice's statistics per row: a row's 256 values are held by the 4
  // lanes of a quad (64 each).
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
      s += acc[4 * j + 2 * i] + acc[4 * j + 2 * i + 1];
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    const float meanLocal = s * (1.f / BN);
    float m2 = 0.f;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const float d0 = acc[4 * j + 2 * i] - meanLocal;
      const float d1 = acc[4 * j + 2 * i + 1] - meanLocal;
      m2 += d0 * d0 + d1 * d1;
    }
    m2 += __shfl_xor_sync(0xffffffffu, m2, 1);
    m2 += __shfl_xor_sync(0xffffffffu, m2, 2);
    if (q == 0)
      asm volatile(
          "st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(stats + 8 * (rl0 + 8 * i)),
          "f"(meanLocal), "f"(m2)
          : "memory");
  }
  cluster_arrive();
  cluster_wait();
  float mean[2], rstd[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float2 part[CLUSTER];
    float sum = 0.f;
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) {
      part[r] = ld_cluster_f2(stats + 8 * (rl0 + 8 * i), r);
      sum += part[r].x;
    }
    mean[i] = sum * (1.f / CLUSTER);
    float m2 = 0.f;
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) {
      const float d = part[r].x - mean[i];
      m2 += part[r].y + float(BN) * d * d;
    }
    rstd[i] = 1.f / sqrtf(m2 * (1.f / N) + p.eps);
  }
  // This CTA has read its peers' statistics; they may exit once every CTA
  // has (the wait is at the end).
  cluster_arrive();

  __half *out = static_cast<__half *>(p.out);
  const bool modulate = p.scale != nullptr, affine = p.norm_weight != nullptr;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const uint32_t cOff = 4 * (4 * j + q);
    float2 mul = make_float2(1.f, 1.f), add = make_float2(0.f, 0.f);
    if (modulate) {
      const float2 sc = lds_half2(sScale + cOff);
      mul = make_float2(1.f + sc.x, 1.f + sc.y);
      add = lds_half2(sShift + cOff);
    } else if (affine) {
      mul = lds_float2(sNormW + 2 * cOff);
      add = lds_float2(sNormB + 2 * cOff);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if (!live[i])
        continue;
      const int64_t row = m0 + rl0 + 8 * i;
      const float y0 = (acc[4 * j + 2 * i] - mean[i]) * rstd[i];
      const float y1 = (acc[4 * j + 2 * i + 1] - mean[i]) * rstd[i];
      *reinterpret_cast<__half2 *>(out + row * N + cq + 8 * j) =
          __floats2half2_rn(y0 * mul.x + add.x, y1 * mul.y + add.y);
    }
  }
  cluster_wait();
}

} // namespace trellis_gemm

#define TRELLIS_GEMM_NORM_SM90_DEFINE(N)                                       \
  extern "C" __global__ void __launch_bounds__(TRELLIS_GEMM_NORM_THREADS, 1)   \
      __cluster_dims__((N) / TRELLIS_GEMM_NORM_BN, 1, 1)                       \
          trellis_gemm_norm_sm90_n##N(                                         \
              const __grid_constant__ CUtensorMap mapA,                        \
              const __grid_constant__ CUtensorMap mapW,                        \
              const __grid_constant__ CUtensorMap mapX,                        \
              const __grid_constant__ TrellisGemmNormParams p) {               \
    trellis_gemm::gemmNormSm90<(N) / TRELLIS_GEMM_NORM_BN>(&mapA, &mapW,       \
                                                           &mapX, p);          \
  }
