// Submanifold 3x3x3 convolution as an implicit GEMM on Hopper (sm_90a, wgmma):
// the neighbour rows are gathered straight into the shared-memory A tiles, so
// the im2col matrix [N, k³·Cin] of trellis_sparse_conv_gather (written and read
// back through device memory: 13 GB for the mesh decoder's 192 -> 96 conv at
// 1.28 M voxels) never exists.
//
//   out[p, n] = bias[n] + Σ_o Σ_c x[nbr[p·kvol + o], c] · W[n, o, c]
//   (W [Cout, k³, Cin] as the op stores it; inactive neighbours (-1) are zero)
//
// CTA = BM / 64 warpgroups (64 output rows each) × BN output channels; the
// CTA's rows of the neighbour map are staged in shared memory once, so a
// gather's source row is a shared-memory read, not a dependent global load.
// The K loop walks the taps o and, inside a tap, Cin in
// chunks of KC halves (64- or 128-byte swizzled tiles): A = the BM gathered
// rows' chunk, B = W[n0 .. n0+BN, o, c0 .. c0+KC); STAGES-deep cp.async ring,
// one
// __syncthreads per chunk, wgmma m64nBNk16 (A and B from shared memory, one
// chunk's products in flight while the next is issued), fp32 accumulators;
// bias added in fp32, one rounding to fp16.
// Requirements (checked by the host): fp16, Cin a multiple of KC, Cout a
// multiple of BN.
#pragma once

#include "runtime/kernels/attention_sm90.cuh"

namespace trellis_sparse {

template <int BM, int BN, int KC, int STAGES>
__device__ __forceinline__ void
convImplicitSm90(const __half *x, const int32_t *nbr, const __half *w,
                 const __half *bias, __half *out, int64_t rows, int32_t cin,
                 int32_t cout, int32_t kvol) {
  using namespace trellis_attn;
  constexpr int THREADS = BM * 2; // one warpgroup per 64 rows
  constexpr int W = KC * 2;       // bytes per tile row: the swizzle width
  constexpr int kChunks = KC / 8; // 16-byte chunks per tile row
  constexpr int kABytes = BM * KC * 2, kBBytes = BN * KC * 2;
  constexpr int kStageBytes = kABytes + kBBytes;
  using LA = SwizzleW<W, BM>;
  using LB = SwizzleW<W, BN>;
  static_assert(BM % 64 == 0 && BN % 8 == 0 && BN <= 256, "tile");
  static_assert(KC == 32 || KC == 64, "KC: 64- or 128-byte swizzled rows");
  static_assert(STAGES >= 3, "stages");

  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  auto sA = [&](int st) { return base + st * kStageBytes; };
  auto sB = [&](int st) { return base + st * kStageBytes + kABytes; };
  // The CTA's rows of the neighbour map, staged once: the gathers of every
  // chunk read their source rows from here instead of global memory.
  int32_t *sNbr = reinterpret_cast<int32_t *>(
      smem_raw + (base - smem_u32(smem_raw)) + STAGES * kStageBytes);

  const int tid = threadIdx.x, wg = tid >> 7, wtid = tid & 127, lane = tid & 31;
  const int64_t m0 = int64_t(blockIdx.x) * BM;
  const int n0 = int(blockIdx.y) * BN;
  const int csteps = cin / KC;
  const int total = kvol * csteps;
  {
    const int64_t valid = min(int64_t(BM), rows - m0) * kvol;
    const int32_t *src = nbr + m0 * kvol;
    for (int i = tid; i < BM * kvol; i += THREADS)
      sNbr[i] = i < valid ? src[i] : -1;
  }
  __syncthreads();

  // Chunk `step` (tap o, channels c0 ..) into stage st: the A rows through
  // the neighbour map (inactive: zero-filled), the B rows from W.
  auto load = [&](int step, int st) {
    const int o = step / csteps, c0 = (step % csteps) * KC;
#pragma unroll
    for (int i0 = 0; i0 < BM * kChunks; i0 += THREADS) {
      const int i = i0 + tid, r = i / kChunks, ch = i % kChunks;
      const int32_t src = sNbr[r * kvol + o];
      const bool ok = src >= 0;
      cp_async_16(sA(st) + LA::off(r, ch),
                  x + (ok ? int64_t(src) * cin + c0 + ch * 8 : 0), ok);
    }
#pragma unroll
    for (int i0 = 0; i0 < BN * kChunks; i0 += THREADS) {
      const int i = i0 + tid;
      if (BN * kChunks % THREADS == 0 || i < BN * kChunks) {
        const int n = i / kChunks, ch = i % kChunks;
        cp_async_16(sB(st) + LB::off(n, ch),
                    w + (int64_t(n0 + n) * kvol + o) * cin + c0 + ch * 8, true);
      }
    }
  };

  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i)
    acc[i] = 0.f;

#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < total)
      load(s, s);
    cp_async_commit();
  }
  // STAGES - 2 chunks are requested ahead; the products of one chunk stay in
  // flight while the next is issued, so the stage refilled at step s is the
  // one chunk s - 2 used (its products completed: wgmma_wait<1> at step s-1).
  const uint64_t descA0 = smem_desc<W>(sA(0) + wg * (64 * W), 16, 8 * W);
  const uint64_t descB0 = smem_desc<W>(sB(0), 16, 8 * W);
  for (int step = 0; step < total; ++step) {
    cp_async_wait<STAGES - 3>(); // this thread's copies of `step` landed
    fence_proxy_async_smem();
    __syncthreads(); // visible to all; the products of step - 2 are done
    const int next = step + STAGES - 2;
    if (next < total)
      load(next, next % STAGES);
    cp_async_commit();
    const uint64_t stage = uint64_t((step % STAGES) * (kStageBytes >> 4));
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KC / 16; ++kk)
      wgmma_ss<BN>(acc, descA0 + stage + kk * 2, descB0 + stage + kk * 2, 1);
    wgmma_commit();
    wgmma_wait<1>();
  }
  wgmma_wait<0>();
  fence_regs<BN / 2>(acc);
  cp_async_wait<0>();

  const int wrow = (wtid >> 5) * 16 + (lane >> 2);
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
    const int n = n0 + i * 8 + 2 * (lane & 3);
    const float b0 = bias ? __half2float(bias[n]) : 0.f;
    const float b1 = bias ? __half2float(bias[n + 1]) : 0.f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = m0 + wg * 64 + wrow + 8 * h;
      if (row < rows)
        *reinterpret_cast<__half2 *>(out + row * cout + n) = __floats2half2_rn(
            acc[4 * i + 2 * h] + b0, acc[4 * i + 2 * h + 1] + b1);
    }
  }
}

} // namespace trellis_sparse

// One entry point per tile configuration (rows BM, output channels BN, input
// channels per chunk KC, stages). Dynamic shared memory: 1 KiB of alignment
// slack, ST stages of (BM + BN) rows of KC halves, then BM · kvol int32
// neighbour rows (ConvTiles::smem in runtime/cuda/SparseCommands.cpp).
#define TRELLIS_SPARSE_CONV_SM90_DEFINE(BM, BN, KC, ST)                        \
  extern "C" __global__ void __launch_bounds__((BM)*2)                         \
      trellis_sparse_conv_implicit_m##BM##_n##BN##_k##KC##_s##ST##_f16(        \
          const __half *x, const int32_t *nbr, const __half *w,                \
          const __half *bias, __half *out, int64_t rows, int32_t cin,          \
          int32_t cout, int32_t kvol) {                                        \
    trellis_sparse::convImplicitSm90<BM, BN, KC, ST>(x, nbr, w, bias, out,     \
                                                     rows, cin, cout, kvol);   \
  }
