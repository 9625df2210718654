// Flash-attention forward for Hopper (sm_90a): warpgroup MMA (wgmma), cp.async
// K/V pipeline.
//
// CTA = BM/64 warpgroups; warpgroup w owns query rows 64w .. 64w+63 of the
// CTA's BM rows.
//   S_j = Q K_j^T : wgmma m64nBNk16, A = Q (registers where the budget allows,
//                   else shared memory), B = K tile in shared memory (K-major,
//                   128-byte swizzle)
//   O  += P_j V_j : wgmma m64nDk16, A = P (registers, fp16), B = V tile
//                   (N-major, 128-byte swizzle)
// Per iteration: issue S_j and P_{j-1} V_{j-1}, wait, exponentiate, rescale O.
// K/V tiles stream through a STAGES-deep ring filled by cp.async (zero-filled
// past the sequence end); a stage is published and given back either by one
// __syncthreads per tile or by mbarriers (MBAR_PIPELINE, below).
#pragma once

#include "runtime/kernels/attention_common.cuh"
#include "runtime/kernels/wgmma.cuh"

namespace trellis_attn {

__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// mbarrier primitives (MBAR_PIPELINE)
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar),
               "r"(count)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar)
               : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile("{\n"
               ".reg .pred done;\n"
               "WAIT_%=:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT_%=;\n"
               "}\n" ::"r"(bar),
               "r"(parity)
               : "memory");
}
// Arrives on the barrier once all of this thread's earlier cp.async copies
// have landed (counted in the barrier's expected arrivals).
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar) {
  asm volatile(
      "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar)
      : "memory");
}
// TMA (the GEMM kernels): this thread's arrival on `bar`, expecting `bytes`
// more from the copies that complete on it; a 2D tile of the tensor map (a
// __grid_constant__ CUtensorMap) at coordinates (c0, c1).
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
      "r"(bytes)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void *map,
                                            int c0, int c1, uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
               "complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
               : "memory");
}
// The K/V stage ring of the MBAR_PIPELINE kernels (here and
// attention_fp8_sm90.cuh): STAGES stages at `bars` (full[st] then empty[st],
// 8 bytes each). Stage st is published by full[st] — one cp.async arrival
// per thread — and given back by empty[st], one arrival per thread once it
// has read the tile; tile t lives in stage t % STAGES.
template <int STAGES, int THREADS> struct MbarRing {
  uint32_t bars;
  __device__ uint32_t full(int st) const { return bars + 8u * st; }
  __device__ uint32_t empty(int st) const { return bars + 8u * (STAGES + st); }
  // Thread 0 initializes every barrier; the block syncs after.
  __device__ void init(int tid) const {
    if (tid == 0) {
      for (int st = 0; st < STAGES; ++st) {
        mbar_init(full(st), THREADS);
        mbar_init(empty(st), THREADS);
      }
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
  }
  // Waits until every thread's copies of tile j have landed.
  __device__ void wait_full(int j) const {
    mbar_wait(full(j % STAGES), (j / STAGES) & 1);
  }
  // At tile j: refills the stage tile j - 2 used with tile j + STAGES - 2
  // (when there is one), after every thread gave that stage back.
  template <class LoadKv>
  __device__ void refill(int j, int ntiles, LoadKv &&load_kv) const {
    const int t = j + STAGES - 2;
    if (t >= ntiles)
      return;
    if (t >= STAGES) // every warpgroup is done with tile t - STAGES
      mbar_wait(empty(t % STAGES), ((t / STAGES) - 1) & 1);
    load_kv(t, t % STAGES);
    cp_async_mbar_arrive(full(t % STAGES));
  }
};
// Keeps the compiler from moving register reads/writes across wgmma issue/wait
// points.
template <int N> __device__ __forceinline__ void fence_regs(float *r) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> __device__ __forceinline__ void fence_regs(uint32_t *r) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+r"(r[i])::"memory");
}

// Shared-memory matrix descriptor for a W-byte swizzle (layout type 1 = 128B, 2
// = 64B, 3 = 32B).
template <int W>
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo,
                                              uint32_t sbo) {
  constexpr uint64_t kType = W == 128 ? 1 : W == 64 ? 2 : 3;
  uint64_t d = 0;
  d |= static_cast<uint64_t>((addr & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>((lbo & 0x3FFFF) >> 4) << 16;
  d |= static_cast<uint64_t>((sbo & 0x3FFFF) >> 4) << 32;
  d |= kType << 62;
  return d;
}

// The epilogue of a warpgroup-MMA attention tile: this thread's rows of the
// m64nD accumulator `o` (rows wrow and wrow + 8 of warpgroup wg) times inv[0] /
// inv[1], rounded to fp16 into the shared tile (layout L: the Q tile, free
// once every warpgroup is done with it — the caller's barrier), then rows
// row0.. of O (valid rows < out.len) from it: fp16, or E4M3 at `quantize` for
// the FP8 linear that reads O (o_quantize).
template <int BM, int D, int THREADS, class L>
__device__ __forceinline__ void
store_o_tile(uint32_t tile, const float *o, const float (&inv)[2], int wg,
             int wrow, int lane, void *o_base, const Seq &out,
             int64_t row_stride, int row0, float quantize, int tid) {
  {
    const int r = wg * 64 + wrow;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const int c = i * 8 + 2 * (lane & 3);
      sts32(tile + L::off(r, c >> 3) + (c & 7) * 2,
            pack_half2(o[4 * i] * inv[0], o[4 * i + 1] * inv[0]));
      sts32(tile + L::off(r + 8, c >> 3) + (c & 7) * 2,
            pack_half2(o[4 * i + 2] * inv[1], o[4 * i + 3] * inv[1]));
    }
  }
  __syncthreads();
  if (quantize != 0.f)
    store_tile_e4m3<BM, D, THREADS, L>(
        tile,
        static_cast<uint8_t *>(o_base) +
            (out.ptr - static_cast<const __half *>(o_base)),
        row_stride, row0, out.len, tid, quantize);
  else
    store_tile<BM, D, THREADS, L>(tile, const_cast<__half *>(out.ptr),
                                  row_stride, row0, out.len, tid);
}

// VARIANT is a mask of TRELLIS_ATTN_SM90_* flags (attention.h):
//   MBAR_PIPELINE: the K/V ring is published and given back through mbarriers
//     (full[stage]: one cp.async arrival per thread; empty[stage]: one
//     arrival per thread once its P V on the stage is done) instead of one
//     __syncthreads per tile, so the warpgroups of a CTA do not run in
//     lockstep. Pays off with 4 warpgroups (BM = 256), where the barrier
//     would hold 512 threads together.
//   ROWSUM_MMA: the row sums come from the tensor cores: the P V product runs
//     with N = D + 8 against a block of ones behind each V tile, so column D
//     of the accumulator is the sum of the fp16 P actually multiplied with V
//     (32 fewer FADDs per thread and tile).
//   FIXED_REF (needs ROWSUM_MMA): the exponentials use one reference per row,
//     fixed after tile 0, instead of the running maximum: no maxima, no
//     rescale factors, no rescaling of O in the loop (about 60 of the ~160
//     softmax instructions per tile and thread). The reference ref_i is the
//     largest logit of tile 0 (so the row's largest P is >= 1: every P is at
//     least as precise as the online softmax's), lowered to bound_i - 15 when
//     k is head-RMS-normalized with gain g (k_gamma, or k_norm_gamma after a
//     pre-pass): then |q_i . k_j| <= ||q_i * g|| sqrt(D) for every key (Cauchy-
//     Schwarz; ||k_j / rms|| = sqrt(D)), so P <= 2^15 stays finite in fp16.
//     Without that bound a later key more than ~16 binades above tile 0's
//     maximum overflows P; the MMA's row sum then is inf, the CTA writes 1 to
//     p.redo_flags[CTA] instead of its output, and the online kernel of the
//     same shape, launched next with the same flags, recomputes exactly those
//     CTAs (the other CTAs find 0 and return at once). One kernel with both
//     loops made ptxas serialize the wgmma (bench/attention/README.md).
template <int D, int BM, int BN, int STAGES, int MINB, int VARIANT>
__device__ __forceinline__ void attn_fwd_sm90(const TrellisAttnParams &p) {
  constexpr bool kRowSumMma = (VARIANT & TRELLIS_ATTN_SM90_ROWSUM_MMA) != 0;
  constexpr bool kMbar = (VARIANT & TRELLIS_ATTN_SM90_MBAR_PIPELINE) != 0;
  constexpr bool kFixedRef = (VARIANT & TRELLIS_ATTN_SM90_FIXED_REF) != 0;
  constexpr int NWG = BM / 64;
  constexpr int THREADS = NWG * 128;
  // Q as a register operand (saves shared-memory bandwidth) only where the
  // register budget allows it (d=64 with >= 200 registers per thread);
  // otherwise wgmma reads Q from shared memory.
  constexpr bool kQRegs = (D == 64) && (65536 / (THREADS * MINB) >= 200);
  constexpr int kQBytes = BM * D * 2;
  constexpr int kTileBytes = BN * D * 2;
  constexpr int KSTEPS = D / 16;  // k16 steps of Q K^T
  constexpr int PSTEPS = BN / 16; // k16 steps of P V
  // 128-byte swizzle when head_dim is a multiple of 64, else 32-byte swizzle
  // (16-half column blocks)
  constexpr int W = (D % 64 == 0) ? 128 : 32;
  constexpr int kKPerBlk = W / 32; // k16 steps per column block
  static_assert(D % 16 == 0 && D <= 256,
                "sm90 path: head_dim must be a multiple of 16");
  static_assert(BM % 64 == 0 && BN % 64 == 0 && BN <= 256, "tile shape");
  static_assert(
      STAGES >= 3,
      "the ring needs >= 3 stages (tile j, tile j-1's V, one in flight)");
  static_assert(!kRowSumMma || W == 128,
                "ROWSUM_MMA needs 128-byte swizzled V tiles");
  static_assert(!kFixedRef || kRowSumMma,
                "FIXED_REF finds an overflowed P through the MMA's row sums");
  // P V's N: the ones block of ROWSUM_MMA is V's next 128-byte column block
  constexpr int DO = D + (kRowSumMma ? 8 : 0);
  constexpr int kOnesBytes = kRowSumMma ? BN * W : 0;
  constexpr int kStageBytes = 2 * kTileBytes + kOnesBytes;
  using LQ = SwizzleW<W, BM>;
  using LKV = SwizzleW<W, BN>;

  extern __shared__ uint8_t smem_raw[];
  const uint32_t sbase = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t sQ = sbase;
  auto sK = [&](int st) { return sbase + kQBytes + st * kStageBytes; };
  auto sV = [&](int st) {
    return sbase + kQBytes + st * kStageBytes + kTileBytes;
  };

  // The warpgroup index through a shuffle from lane 0, so that the compiler
  // knows it is warp-uniform (the operand descriptors built from it can live
  // in uniform registers).
  const int tid = threadIdx.x, wtid = tid & 127, lane = tid & 31;
  const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
  const int wrow = (wtid >> 5) * 16 +
                   (lane >> 2); // this thread's first row within the warpgroup
  const int tiles = (p.seqlen_q + BM - 1) / BM;
  const int seq = blockIdx.x / tiles, m0 = (blockIdx.x % tiles) * BM,
            h = blockIdx.y;
  // FIXED_REF: this CTA's entry of redo_flags, written on every path; the
  // online kernel's second launch recomputes only the CTAs flagged 1.
  if constexpr (!kFixedRef) {
    if (p.redo_flags && p.redo_flags[blockIdx.y * gridDim.x + blockIdx.x] == 0)
      return;
  }

  const Seq q = make_seq(p.q, p.cu_seqlens_q, p.q_batch_stride, p.q_row_stride,
                         p.q_head_stride, p.seqlen_q, seq, h);
  if (m0 >= q.len) {
    if (kFixedRef && tid == 0)
      p.redo_flags[blockIdx.y * gridDim.x + blockIdx.x] = 0;
    return;
  }
  const Seq k = make_seq(p.k, p.cu_seqlens_k, p.k_batch_stride, p.k_row_stride,
                         p.k_head_stride, p.seqlen_k, seq, h);
  const Seq v = make_seq(p.v, p.cu_seqlens_k, p.v_batch_stride, p.v_row_stride,
                         p.v_head_stride, p.seqlen_k, seq, h);
  const int ntiles = (k.len + BN - 1) / BN;
  const bool norm_q = p.q_gamma != nullptr, norm_k = p.k_gamma != nullptr;
  if (ntiles == 0) { // no keys: O = 0 for this tile's rows
    if (kFixedRef && tid == 0)
      p.redo_flags[blockIdx.y * gridDim.x + blockIdx.x] = 0;
    const Seq out =
        make_seq(p.o, p.cu_seqlens_q, p.o_batch_stride, p.o_row_stride,
                 p.o_head_stride, p.seqlen_q, seq, h);
    for (int i = tid; i < BM * (D / 8); i += THREADS) {
      const int r = i / (D / 8), c = i % (D / 8);
      if (m0 + r < out.len)
        *reinterpret_cast<uint4 *>(
            const_cast<__half *>(out.ptr) +
            static_cast<int64_t>(m0 + r) * p.o_row_stride + c * 8) =
            make_uint4(0u, 0u, 0u, 0u);
    }
    return;
  }

  // K/V tiles are requested in order, one call per tile: streamed where each
  // thread keeps one chunk column (THREADS a multiple of D / 8), else copied
  // tile by tile.
  constexpr bool kStreamKV = THREADS % (D / 8) == 0;
  using KVStream = TileStream<BN, D, kStreamKV ? THREADS : D / 8, LKV>;
  KVStream kStream(k.ptr, p.k_row_stride, k.len, tid);
  KVStream vStream(v.ptr, p.v_row_stride, v.len, tid);
  auto load_kv = [&](int j, int st) {
    if constexpr (kStreamKV) {
      kStream.load(sK(st));
      vStream.load(sV(st));
    } else {
      load_tile<BN, D, THREADS, LKV>(sK(st), k.ptr, p.k_row_stride, j * BN,
                                     k.len, tid);
      load_tile<BN, D, THREADS, LKV>(sV(st), v.ptr, p.v_row_stride, j * BN,
                                     v.len, tid);
    }
  };

  if constexpr (kRowSumMma) { // fp16 ones, for the async proxy (wgmma); the
                              // barrier below or begin_tile(0)'s publishes
    for (int i = tid; i < STAGES * kOnesBytes / 16; i += THREADS)
      sts128(sV(i / (kOnesBytes / 16)) + kTileBytes +
                 (i % (kOnesBytes / 16)) * 16,
             make_uint4(0x3C003C00u, 0x3C003C00u, 0x3C003C00u, 0x3C003C00u));
    fence_proxy_async_smem();
  }
  // MBAR_PIPELINE: the K/V stages' barriers (MbarRing) follow the stages.
  const MbarRing<STAGES, THREADS> ring{sbase + kQBytes + STAGES * kStageBytes};
  if constexpr (kMbar)
    ring.init(tid);
  // prologue: group 0 = Q + tile 0, groups 1..STAGES-3 = tiles 1..STAGES-3
  load_tile<BM, D, THREADS, LQ>(sQ, q.ptr, p.q_row_stride, m0, q.len, tid);
  load_kv(0, 0);
  if constexpr (kMbar)
    cp_async_mbar_arrive(ring.full(0));
  else
    cp_async_commit();
#pragma unroll
  for (int t = 1; t <= STAGES - 3; ++t) {
    if (t < ntiles)
      load_kv(t, t);
    if constexpr (kMbar)
      cp_async_mbar_arrive(ring.full(t));
    else
      cp_async_commit();
  }

  const float sl2 = p.softmax_scale * 1.4426950408889634f;
  float m_row[2] = {-INFINITY, -INFINITY};
  float l_row[2] = {0.f, 0.f};
  float o[DO / 2]; // ROWSUM_MMA: o[D/2] and o[D/2 + 2] are the two rows' sums
#pragma unroll
  for (int i = 0; i < DO / 2; ++i)
    o[i] = 0.f;
  float s[BN / 2];
  uint32_t qf[kQRegs ? KSTEPS : 1][4];
  uint32_t pf[PSTEPS][4];
  float ref2[2]; // FIXED_REF: the rows' references (log2 units, scaled)

  // Top of iteration j: tile j resident and visible to the async proxy, next
  // tile requested.
  // Fused head RMS norm of q (once) and of each K tile, in place.
  auto normalize = [&](int j) {
    if (norm_q && j == 0)
      rmsnorm_tile<BM, D, THREADS, LQ>(sQ, p.q_gamma + h * D, tid);
    if (norm_k)
      rmsnorm_tile<BN, D, THREADS, LKV>(sK(j % STAGES), p.k_gamma + h * D, tid);
  };
  auto begin_tile = [&](int j) {
    if constexpr (kMbar) {
      ring.wait_full(j); // everyone's copies
      const bool normalizing = (norm_q && j == 0) || norm_k;
      if (normalizing)
        normalize(j);
      fence_proxy_async_smem();
      if (normalizing)
        __syncthreads(); // the normalized chunks visible to every warpgroup
      ring.refill(j, ntiles, load_kv);
      return;
    }
    cp_async_wait<STAGES -
                  3>(); // this thread's copies of tile j (and Q) have landed
    if (norm_q || norm_k) {
      if constexpr (!kRmsOwnChunks<D>)
        __syncthreads();
      normalize(j);
    }
    fence_proxy_async_smem();
    __syncthreads(); // tile j visible to all; everyone finished iteration j-1
                     // (PV_{j-2} complete)
    const int t = j + STAGES - 2; // refill the stage that tile j-2 used
    if (t < ntiles)
      load_kv(t, t % STAGES);
    cp_async_commit();
  };
  // The operands' shared-memory descriptors, built once: a descriptor holds
  // the address >> 4 in its low 14 bits, and every operand lies below 256 KiB,
  // so an offset is added to the descriptor as offset >> 4 without a carry.
  const uint64_t descK0 = smem_desc<W>(sK(0), 16, 8 * W);
  const uint64_t descV0 = smem_desc<W>(sV(0), BN * W, 8 * W); // N-major
  const uint64_t descQ0 = smem_desc<W>(sQ + wg * (64 * W), 16, 8 * W);
  // S_j = Q K_j^T (issue only)
  auto issue_qk = [&](int j) {
    const uint64_t kb = descK0 + uint64_t((j % STAGES) * (kStageBytes >> 4));
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
      const uint64_t db =
          kb + ((kk / kKPerBlk) * (BN * W) + (kk % kKPerBlk) * 32) / 16;
      if constexpr (kQRegs) {
        wgmma_rs<BN, 0>(s, qf[kk], db, kk > 0);
      } else {
        const uint64_t da =
            descQ0 + ((kk / kKPerBlk) * (BM * W) + (kk % kKPerBlk) * 32) / 16;
        wgmma_ss<BN>(s, da, db, kk > 0);
      }
    }
    wgmma_commit();
  };
  // O += P V_j (issue only)
  auto issue_pv = [&](int j) {
    const uint64_t vb = descV0 + uint64_t((j % STAGES) * (kStageBytes >> 4));
#pragma unroll
    for (int kk = 0; kk < PSTEPS; ++kk)
      wgmma_rs<DO, 1>(o, pf[kk], vb + kk * (16 * W) / 16, 1);
    wgmma_commit();
  };
  // The largest logit of this thread's row r in S_j (and mx), over the quad.
  auto row_max = [&](int r, float mx) {
#pragma unroll
    for (int i = 0; i < BN / 8; ++i)
      mx = fmaxf(mx, fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    return fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  };
  // FIXED_REF: where k is head-normalized with gain g, the bound on the
  // logits of this thread's rows (log2 units, scaled): |q_i . k_j| <=
  // ||q_i * g|| sqrt(D), from sQ (the queries as multiplied); else +inf.
  float bound2[2] = {INFINITY, INFINITY};
  auto row_bounds = [&]() {
    const float *gk = p.k_gamma ? p.k_gamma : p.k_norm_gamma;
    if (!gk)
      return;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // ||q_i * g||^2 over this lane's D/4 columns, then the quad's
      const int row = wg * 64 + wrow + 8 * r;
      float qq = 0.f;
#pragma unroll 1
      for (int c = 0; c < D / 32; ++c) {
        const int chunk = (lane & 3) * (D / 32) + c;
        const uint4 x = lds128(sQ + LQ::off(row, chunk));
        const __half2 *hx = reinterpret_cast<const __half2 *>(&x);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 f = __half22float2(hx[e]);
          const float a = f.x * __ldg(gk + h * D + chunk * 8 + 2 * e);
          const float b = f.y * __ldg(gk + h * D + chunk * 8 + 2 * e + 1);
          qq = fmaf(a, a, fmaf(b, b, qq));
        }
      }
      qq += __shfl_xor_sync(0xffffffffu, qq, 1);
      qq += __shfl_xor_sync(0xffffffffu, qq, 2);
      // k's fp16 rounding adds at most 2^-11 to each |k_j,e|; the margin of
      // 2^-9 also covers the fp32 sums, and keeps every P <= 2^15.2.
      bound2[r] = sqrtf(qq * static_cast<float>(D)) * sl2 * 1.001953125f;
    }
  };
  // FIXED_REF: the references from S_0 (masked logits): tile 0's largest
  // logit (finite: tile 0 has a key), or bound - 15 where that is lower.
  auto fix_references = [&]() {
#pragma unroll
    for (int r = 0; r < 2; ++r)
      ref2[r] = fminf(row_max(r, -INFINITY) * sl2, bound2[r] - 15.f);
  };

  // Softmax of S_j in place (fp32): the exponentials, and for the online
  // softmax the running maxima and (without ROWSUM_MMA) the row sums; alpha =
  // the rescale factors of O's rows (FIXED_REF: none).
  auto softmax = [&](int j, float(&alpha)[2]) {
    if ((j + 1) * BN > k.len) { // columns past the end
      const int cbase = j * BN + 2 * (lane & 3);
#pragma unroll
      for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (cbase + i * 8 + (e & 1) >= k.len)
            s[4 * i + e] = -INFINITY;
      }
    }
    if constexpr (kFixedRef) {
      if (j == 0)
        fix_references();
#pragma unroll
      for (int i = 0; i < BN / 4; ++i) { // s[2i], s[2i+1]: row i & 1
        s[2 * i] = fast_exp2(fmaf(s[2 * i], sl2, -ref2[i & 1]));
        s[2 * i + 1] = fast_exp2(fmaf(s[2 * i + 1], sl2, -ref2[i & 1]));
      }
    } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float mx = row_max(r, m_row[r]);
        const float ms = (mx == -INFINITY) ? 0.f : mx * sl2;
        alpha[r] = fast_exp2(m_row[r] * sl2 - ms);
        m_row[r] = mx;
        [[maybe_unused]] float sum = 0.f;
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) {
          s[4 * i + 2 * r] = fast_exp2(fmaf(s[4 * i + 2 * r], sl2, -ms));
          s[4 * i + 2 * r + 1] =
              fast_exp2(fmaf(s[4 * i + 2 * r + 1], sl2, -ms));
          if constexpr (!kRowSumMma)
            sum += s[4 * i + 2 * r] + s[4 * i + 2 * r + 1];
        }
        if constexpr (!kRowSumMma)
          l_row[r] = l_row[r] * alpha[r] + sum;
      }
    }
  };
  // O *= alpha; P = fp16(S)
  auto rescale_and_pack = [&](const float(&alpha)[2]) {
    if constexpr (!kFixedRef) {
#pragma unroll
      for (int i = 0; i < DO / 8; ++i) {
        o[4 * i + 0] *= alpha[0];
        o[4 * i + 1] *= alpha[0];
        o[4 * i + 2] *= alpha[1];
        o[4 * i + 3] *= alpha[1];
      }
    }
#pragma unroll
    for (int kk = 0; kk < PSTEPS; ++kk) {
      pf[kk][0] = pack_half2(s[8 * kk + 0], s[8 * kk + 1]);
      pf[kk][1] = pack_half2(s[8 * kk + 2], s[8 * kk + 3]);
      pf[kk][2] = pack_half2(s[8 * kk + 4], s[8 * kk + 5]);
      pf[kk][3] = pack_half2(s[8 * kk + 6], s[8 * kk + 7]);
    }
  };

  // tile 0 (peeled: no P V in flight yet)
  begin_tile(0);
  if constexpr (kFixedRef)
    row_bounds();
  if constexpr (kQRegs) {
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
      const int r = wg * 64 + wrow, c = kk * 16 + 2 * (lane & 3);
      qf[kk][0] = lds32(sQ + LQ::off(r, c >> 3) + (c & 7) * 2);
      qf[kk][1] = lds32(sQ + LQ::off(r + 8, c >> 3) + (c & 7) * 2);
      qf[kk][2] = lds32(sQ + LQ::off(r, (c + 8) >> 3) + (c & 7) * 2);
      qf[kk][3] = lds32(sQ + LQ::off(r + 8, (c + 8) >> 3) + (c & 7) * 2);
    }
  }
  {
    wgmma_fence();
    issue_qk(0);
    wgmma_wait<0>();
    fence_regs<BN / 2>(s);
    float alpha[2];
    softmax(0, alpha);
    rescale_and_pack(alpha);
  }
  // Steady state: S_j and P_{j-1} V_{j-1} are issued together. The source
  // waits for S_j, runs the softmax, then waits for P V; ptxas however moves
  // the second wait up to the first (seen in the SASS of every configuration,
  // bench/attention/README.md), so a warpgroup's softmax overlaps the other
  // warpgroups' products, not its own.
  for (int j = 1; j < ntiles; ++j) {
    begin_tile(j);
    wgmma_fence();
    issue_qk(j);
    issue_pv(j - 1);
    wgmma_wait<1>();
    fence_regs<BN / 2>(s);
    float alpha[2];
    softmax(j, alpha);
    wgmma_wait<0>();
    if constexpr (kMbar) // this thread is done with tile j-1's stage
      mbar_arrive(ring.empty((j - 1) % STAGES));
    fence_regs<DO / 2>(o);
    fence_regs<PSTEPS * 4>(&pf[0][0]);
    rescale_and_pack(alpha);
  }
  wgmma_fence();
  issue_pv(ntiles - 1);
  wgmma_wait<0>();
  fence_regs<DO / 2>(o);
  cp_async_wait<0>();
  if constexpr (kRowSumMma) {
    l_row[0] = o[D / 2];
    l_row[1] = o[D / 2 + 2];
  }

  // epilogue: O / l -> fp16 -> this warpgroup's rows of sQ -> global (16-byte
  // stores)
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_row[r];
    if constexpr (!kRowSumMma) { // the MMA's sums are already over all columns
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
    }
    inv[r] = l > 0.f ? 1.f / l : 0.f;
  }
  if constexpr (kFixedRef) {
    // An overflowed P (inf) makes its row's MMA sum inf: the online kernel
    // redoes this CTA. (Rows past the sequence hold zero queries: their P are
    // 1 or 2^15.)
    const bool overflow = !(l_row[0] <= 3.0e38f && l_row[1] <= 3.0e38f);
    const int redo = __syncthreads_or(overflow); // also the barrier below
    if (tid == 0)
      p.redo_flags[blockIdx.y * gridDim.x + blockIdx.x] = redo;
    if (redo)
      return;
  } else {
    __syncthreads(); // every warpgroup is done with sQ (Q operand) and the
                     // K/V stages
  }
  const Seq out = make_seq(p.o, p.cu_seqlens_q, p.o_batch_stride,
                           p.o_row_stride, p.o_head_stride, p.seqlen_q, seq, h);
  store_o_tile<BM, D, THREADS, LQ>(sQ, o, inv, wg, wrow, lane, p.o, out,
                                   p.o_row_stride, m0, p.o_quantize, tid);
}

} // namespace trellis_attn
