// Flash-attention forward for Hopper (sm_90a), warp-specialized (FA3's
// structure): one producer warpgroup fills a K/V ring in shared memory, two
// consumer warpgroups run the matrix products and the softmax, taking turns on
// the tensor cores (ping-pong).
//
// CTA = 3 warpgroups, 384 threads, one CTA per SM:
//   warpgroup 0 (producer, setmaxnreg 56): cp.async copies of the Q tile and of
//     each K/V tile into a STAGES-deep ring, the fused head RMS norms of q and
//     k (in shared memory, once per tile), then an mbarrier arrival that
//     publishes the tile. It waits on the stage's `empty` barrier before
//     refilling it.
//   warpgroups 1, 2 (consumers, setmaxnreg 224): query rows 64c .. 64c+63 of
//     the CTA's BM = 128 rows each. Per key tile j, as in attention_sm90.cuh:
//     issue S_j = Q K_j^T and P_{j-1} V_{j-1}, softmax of S_j while P V runs,
//     rescale O. The two consumers alternate their issue points through two
//     named barriers, so one warpgroup's softmax runs while the other's
//     products occupy the tensor cores.
// Differences from attention_sm90.cuh (the one-role kernel): no __syncthreads
// per tile (consumers wait only on mbarriers, the producer runs ahead), the
// copies and the norms leave the consumers' instruction stream, and the
// ping-pong keeps the tensor cores busy between one warpgroup's products.
#pragma once

#include "attention_sm90.cuh"

namespace trellis_attn {

// ---- mbarrier and named-barrier primitives (sm_90)
// -----------------------------------------------------------
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
// Arrives on the barrier when all of this thread's earlier cp.async copies
// have landed (the barrier's expected count includes this arrival).
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(
                   bar)
               : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}
// bar.sync / bar.arrive on a named barrier (id 1..15; 0 is __syncthreads).
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
template <int N> __device__ __forceinline__ void setmaxnreg_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N> __device__ __forceinline__ void setmaxnreg_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

// Named barriers of this kernel.
enum : int {
  kBarTurn0 = 1,    // consumer 0 may issue (consumer 1 arrives)
  kBarTurn1 = 2,    // consumer 1 may issue (consumer 0 arrives)
  kBarStore0 = 3,   // consumer 0's O rows are in shared memory
  kBarProducer = 5, // producer-internal (norms over rows split across warps)
};

// load_tile for the producer: the same copies, issued from a rolled loop so
// that the producer fits in its 56 registers (it has time to spare).
template <int ROWS, int D, int THREADS, class Layout>
__device__ __forceinline__ void load_tile_rolled(uint32_t tile,
                                                 const __half *base,
                                                 int64_t row_stride, int row0,
                                                 int len, int tid) {
  constexpr int kChunks = D / 8;
  constexpr int kTotal = ROWS * kChunks;
#pragma unroll 1
  for (int i = tid; i < kTotal; i += THREADS) {
    const int r = i / kChunks, c = i % kChunks;
    const int row = row0 + r;
    const bool ok = row < len;
    const __half *src =
        base + (ok ? static_cast<int64_t>(row) * row_stride + c * 8 : 0);
    cp_async_16(tile + Layout::off(r, c), src, ok);
  }
}

// Shared-memory layout: Q tile, STAGES x (K tile, V tile), then the
// mbarriers fullQ, fullK[STAGES], fullV[STAGES], empty[STAGES].
template <int D, int BM, int BN, int STAGES> struct WsSmem {
  static constexpr int kQBytes = BM * D * 2;
  static constexpr int kTileBytes = BN * D * 2;
  uint32_t base; // 1024-byte aligned
  __device__ __forceinline__ uint32_t q() const { return base; }
  __device__ __forceinline__ uint32_t k(int st) const {
    return base + kQBytes + st * 2 * kTileBytes;
  }
  __device__ __forceinline__ uint32_t v(int st) const {
    return k(st) + kTileBytes;
  }
  __device__ __forceinline__ uint32_t bar_q() const {
    return base + kQBytes + STAGES * 2 * kTileBytes;
  }
  __device__ __forceinline__ uint32_t bar_k(int st) const {
    return bar_q() + 8u * (1 + st);
  }
  __device__ __forceinline__ uint32_t bar_v(int st) const {
    return bar_q() + 8u * (1 + STAGES + st);
  }
  __device__ __forceinline__ uint32_t bar_empty(int st) const {
    return bar_q() + 8u * (1 + 2 * STAGES + st);
  }
};

// The consumer warpgroups' part (query rows 64 cw .. 64 cw + 63 of the tile
// at m0): products, online softmax, epilogue.
template <int D, int BM, int BN, int STAGES, bool PINGPONG>
__device__ __forceinline__ void
attn_consumer_sm90_ws(const TrellisAttnParams &p, const Seq &k, const Seq &out,
                      int m0, int ntiles, WsSmem<D, BM, BN, STAGES> sm) {
  constexpr int kQRegs = (D == 64); // Q as the register operand of Q K^T
  constexpr int KSTEPS = D / 16;
  constexpr int PSTEPS = BN / 16;
  constexpr int W = (D % 64 == 0) ? 128 : 32;
  constexpr int kKPerBlk = W / 32;
  using LQ = SwizzleW<W, BM>;
  const uint32_t sQ = sm.q();
  auto sK = [&](int st) { return sm.k(st); };
  auto sV = [&](int st) { return sm.v(st); };
  auto barQ = sm.bar_q();
  auto barK = [&](int st) { return sm.bar_k(st); };
  auto barV = [&](int st) { return sm.bar_v(st); };
  auto barEmpty = [&](int st) { return sm.bar_empty(st); };
  const int tid = threadIdx.x, wg = tid >> 7, wtid = tid & 127,
            lane = tid & 31;

  setmaxnreg_inc<224>();
  const int cw = wg - 1; // this consumer's rows: 64 cw .. 64 cw + 63
  const int wrow = (wtid >> 5) * 16 + (lane >> 2);
  const float sl2 = p.softmax_scale * 1.4426950408889634f;
  float m_row[2] = {-INFINITY, -INFINITY};
  float l_row[2] = {0.f, 0.f};
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i)
    o[i] = 0.f;
  float s[BN / 2];
  uint32_t qf[kQRegs ? KSTEPS : 1][4];
  uint32_t pf[PSTEPS][4];

  // Ping-pong: consumer 0 issues slot k after consumer 1 issued slot k-1,
  // consumer 1 issues slot k after consumer 0 issued slot k. Slots: 0 = S_0;
  // j = 1 .. n-1 = S_j with P_{j-1} V_{j-1}; n = P_{n-1} V_{n-1}. Every
  // arrival has a matching sync: consumer 1 skips its arrival after slot n.
  auto turn_wait = [&](int slot) {
    if constexpr (!PINGPONG)
      return;
    if (cw == 0) {
      if (slot > 0)
        named_sync(kBarTurn0, 256);
    } else {
      named_sync(kBarTurn1, 256);
    }
  };
  auto turn_pass = [&](int slot) {
    if constexpr (!PINGPONG)
      return;
    if (cw == 0)
      named_arrive(kBarTurn1, 256);
    else if (slot < ntiles)
      named_arrive(kBarTurn0, 256);
  };
  auto release = [&](int j) { // P_j V_j done: stage j % STAGES may be refilled
    __syncwarp();
    if (lane == 0)
      mbar_arrive(barEmpty(j % STAGES));
  };

  auto issue_qk = [&](int j) {
    const uint32_t kb = sK(j % STAGES);
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
      const uint64_t db = smem_desc<W>(
          kb + (kk / kKPerBlk) * (BN * W) + (kk % kKPerBlk) * 32, 16, 8 * W);
      if constexpr (kQRegs) {
        wgmma_rs<BN, 0>(s, qf[kk], db, kk > 0);
      } else {
        const uint64_t da =
            smem_desc<W>(sQ + (kk / kKPerBlk) * (BM * W) + cw * (64 * W) +
                             (kk % kKPerBlk) * 32,
                         16, 8 * W);
        wgmma_ss<BN>(s, da, db, kk > 0);
      }
    }
    wgmma_commit();
  };
  auto issue_pv = [&](int j) {
    const uint32_t vb = sV(j % STAGES);
#pragma unroll
    for (int kk = 0; kk < PSTEPS; ++kk) {
      const uint64_t dv = smem_desc<W>(vb + kk * (16 * W), BN * W, 8 * W);
      wgmma_rs<D, 1>(o, pf[kk], dv, 1);
    }
    wgmma_commit();
  };
  auto softmax = [&](int j, float(&alpha)[2]) {
    if ((j + 1) * BN > k.len) {
      const int cbase = j * BN + 2 * (lane & 3);
#pragma unroll
      for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (cbase + i * 8 + (e & 1) >= k.len)
            s[4 * i + e] = -INFINITY;
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m_row[r];
#pragma unroll
      for (int i = 0; i < BN / 8; ++i)
        mx = fmaxf(mx, fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float ms = (mx == -INFINITY) ? 0.f : mx * sl2;
      alpha[r] = fast_exp2(m_row[r] * sl2 - ms);
      m_row[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < BN / 8; ++i) {
        s[4 * i + 2 * r] = fast_exp2(fmaf(s[4 * i + 2 * r], sl2, -ms));
        s[4 * i + 2 * r + 1] = fast_exp2(fmaf(s[4 * i + 2 * r + 1], sl2, -ms));
        sum += s[4 * i + 2 * r] + s[4 * i + 2 * r + 1];
      }
      l_row[r] = l_row[r] * alpha[r] + sum;
    }
  };
  auto rescale_and_pack = [&](const float(&alpha)[2]) {
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      o[4 * i + 0] *= alpha[0];
      o[4 * i + 1] *= alpha[0];
      o[4 * i + 2] *= alpha[1];
      o[4 * i + 3] *= alpha[1];
    }
#pragma unroll
    for (int kk = 0; kk < PSTEPS; ++kk) {
      pf[kk][0] = pack_half2(s[8 * kk + 0], s[8 * kk + 1]);
      pf[kk][1] = pack_half2(s[8 * kk + 2], s[8 * kk + 3]);
      pf[kk][2] = pack_half2(s[8 * kk + 4], s[8 * kk + 5]);
      pf[kk][3] = pack_half2(s[8 * kk + 6], s[8 * kk + 7]);
    }
  };

  mbar_wait(barQ, 0);
  if constexpr (kQRegs) {
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
      const int r = cw * 64 + wrow, c = kk * 16 + 2 * (lane & 3);
      qf[kk][0] = lds32(sQ + LQ::off(r, c >> 3) + (c & 7) * 2);
      qf[kk][1] = lds32(sQ + LQ::off(r + 8, c >> 3) + (c & 7) * 2);
      qf[kk][2] = lds32(sQ + LQ::off(r, (c + 8) >> 3) + (c & 7) * 2);
      qf[kk][3] = lds32(sQ + LQ::off(r + 8, (c + 8) >> 3) + (c & 7) * 2);
    }
  }
  { // slot 0: S_0 alone
    mbar_wait(barK(0), 0);
    fence_proxy_async_smem(); // cp.async (generic proxy) -> wgmma reads
    turn_wait(0);
    wgmma_fence();
    issue_qk(0);
    turn_pass(0);
    wgmma_wait<0>();
    fence_regs<BN / 2>(s);
    float alpha[2];
    softmax(0, alpha);
    rescale_and_pack(alpha);
  }
  for (int j = 1; j < ntiles; ++j) { // slot j
    mbar_wait(barK(j % STAGES), (j / STAGES) & 1);
    mbar_wait(barV((j - 1) % STAGES), ((j - 1) / STAGES) & 1);
    fence_proxy_async_smem();
    turn_wait(j);
    wgmma_fence();
    issue_qk(j);
    issue_pv(j - 1);
    turn_pass(j);
    wgmma_wait<1>();
    fence_regs<BN / 2>(s);
    float alpha[2];
    softmax(j, alpha);
    wgmma_wait<0>();
    fence_regs<D / 2>(o);
    fence_regs<PSTEPS * 4>(&pf[0][0]);
    release(j - 1);
    rescale_and_pack(alpha);
  }
  { // slot n: the last P V
    const int j = ntiles;
    mbar_wait(barV((j - 1) % STAGES), ((j - 1) / STAGES) & 1);
    fence_proxy_async_smem();
    turn_wait(j);
    wgmma_fence();
    issue_pv(j - 1);
    turn_pass(j);
    wgmma_wait<0>();
    fence_regs<D / 2>(o);
    release(j - 1);
  }

  // epilogue: O / l -> fp16 -> this consumer's rows of sQ (only it reads them)
  // -> global
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_row[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    inv[r] = l > 0.f ? 1.f / l : 0.f;
  }
  {
    const int r = cw * 64 + wrow;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const int c = i * 8 + 2 * (lane & 3);
      sts32(sQ + LQ::off(r, c >> 3) + (c & 7) * 2,
            pack_half2(o[4 * i] * inv[0], o[4 * i + 1] * inv[0]));
      sts32(sQ + LQ::off(r + 8, c >> 3) + (c & 7) * 2,
            pack_half2(o[4 * i + 2] * inv[1], o[4 * i + 3] * inv[1]));
    }
  }
  named_sync(kBarStore0 + cw, 128);
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int i0 = 0; i0 < 64 * kChunks; i0 += 128) {
    const int i = i0 + wtid;
    const int r = cw * 64 + i / kChunks, c = i % kChunks;
    if (m0 + r < out.len) {
      const uint4 val = lds128(sQ + LQ::off(r, c));
      *reinterpret_cast<uint4 *>(const_cast<__half *>(out.ptr) +
                                 static_cast<int64_t>(m0 + r) * p.o_row_stride +
                                 c * 8) = val;
    }
  }
}

template <int D, int BM, int BN, int STAGES, bool PINGPONG>
__device__ __forceinline__ void attn_fwd_sm90_ws(const TrellisAttnParams &p) {
  constexpr int NC = BM / 64; // consumer warpgroups
  static_assert(NC == 2, "the ping-pong schedule is written for 2 consumers");
  constexpr int kProducerThreads = 128;
  constexpr int W = (D % 64 == 0) ? 128 : 32;
  static_assert(D % 16 == 0 && D <= 128, "head_dim");
  static_assert(BN % 64 == 0 && BN <= 256, "tile shape");
  static_assert(STAGES >= 2, "the ring needs >= 2 stages");
  using LQ = SwizzleW<W, BM>;
  using LKV = SwizzleW<W, BN>;

  extern __shared__ uint8_t smem_raw[];
  const WsSmem<D, BM, BN, STAGES> sm{(smem_u32(smem_raw) + 1023u) & ~1023u};
  const uint32_t sQ = sm.q();
  auto sK = [&](int st) { return sm.k(st); };
  auto sV = [&](int st) { return sm.v(st); };
  const uint32_t barQ = sm.bar_q();
  auto barK = [&](int st) { return sm.bar_k(st); };
  auto barV = [&](int st) { return sm.bar_v(st); };
  auto barEmpty = [&](int st) { return sm.bar_empty(st); };

  const int tid = threadIdx.x, wg = tid >> 7, wtid = tid & 127;
  const int tiles = (p.seqlen_q + BM - 1) / BM;
  const int seq = blockIdx.x / tiles, m0 = (blockIdx.x % tiles) * BM,
            h = blockIdx.y;

  const Seq q = make_seq(p.q, p.cu_seqlens_q, p.q_batch_stride, p.q_row_stride,
                         p.q_head_stride, p.seqlen_q, seq, h);
  if (m0 >= q.len)
    return;
  const Seq k = make_seq(p.k, p.cu_seqlens_k, p.k_batch_stride, p.k_row_stride,
                         p.k_head_stride, p.seqlen_k, seq, h);
  const Seq v = make_seq(p.v, p.cu_seqlens_k, p.v_batch_stride, p.v_row_stride,
                         p.v_head_stride, p.seqlen_k, seq, h);
  const Seq out = make_seq(p.o, p.cu_seqlens_q, p.o_batch_stride,
                           p.o_row_stride, p.o_head_stride, p.seqlen_q, seq, h);
  const int ntiles = (k.len + BN - 1) / BN;
  if (ntiles == 0) { // no keys: O = 0 for this tile's rows
    for (int i = tid; i < BM * (D / 8); i += blockDim.x) {
      const int r = i / (D / 8), c = i % (D / 8);
      if (m0 + r < out.len)
        *reinterpret_cast<uint4 *>(
            const_cast<__half *>(out.ptr) +
            static_cast<int64_t>(m0 + r) * p.o_row_stride + c * 8) =
            make_uint4(0u, 0u, 0u, 0u);
    }
    return;
  }

  if (tid == 0) {
    mbar_init(barQ, kProducerThreads);
    for (int st = 0; st < STAGES; ++st) {
      mbar_init(barK(st), kProducerThreads);
      mbar_init(barV(st), kProducerThreads);
      mbar_init(barEmpty(st), NC * 4); // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    // ------------------------------------------------------------ producer
    setmaxnreg_dec<56>();
    const bool norm_q = p.q_gamma != nullptr, norm_k = p.k_gamma != nullptr;
    // Completes a copy group the thread issued earlier: norms in place, then
    // make the tile visible to wgmma (async proxy) and publish it.
    auto normalize = [&](uint32_t tile, const float *gamma, bool q_tile) {
      if constexpr (kRmsOwnChunks<D>) {
        if (q_tile)
          rmsnorm_tile<BM, D, kProducerThreads, LQ>(tile, gamma, wtid);
        else
          rmsnorm_tile<BN, D, kProducerThreads, LKV>(tile, gamma, wtid);
      } else { // rows split across warps: the whole tile must have landed
        named_sync(kBarProducer, kProducerThreads);
        if (q_tile)
          rmsnorm_tile<BM, D, kProducerThreads, LQ>(tile, gamma, wtid);
        else
          rmsnorm_tile<BN, D, kProducerThreads, LKV>(tile, gamma, wtid);
      }
    };
    load_tile_rolled<BM, D, kProducerThreads, LQ>(sQ, q.ptr, p.q_row_stride, m0,
                                           q.len, wtid);
    // Q first (once per CTA): wait for it, normalize, publish.
    cp_async_commit();
    cp_async_wait<0>();
    if (norm_q)
      normalize(sQ, p.q_gamma + h * D, true);
    fence_proxy_async_smem();
    mbar_arrive(barQ);
    // K/V tiles: each copy arrives on the tile's barrier when it lands
    // (cp.async.mbarrier.arrive.noinc), so the producer only ever waits for a
    // free stage. With a fused k norm it waits for its own copies, normalizes
    // the K tile and arrives itself (same count: one arrival per thread).
    for (int t = 0; t < ntiles; ++t) {
      const int st = t % STAGES;
      if (t >= STAGES)
        mbar_wait(barEmpty(st), ((t / STAGES) - 1) & 1);
      load_tile_rolled<BN, D, kProducerThreads, LKV>(
          sK(st), k.ptr, p.k_row_stride, t * BN, k.len, wtid);
      if (norm_k) {
        cp_async_commit();
        cp_async_wait<0>();
        normalize(sK(st), p.k_gamma + h * D, false);
        fence_proxy_async_smem();
        mbar_arrive(barK(st));
      } else {
        cp_async_mbar_arrive(barK(st));
      }
      load_tile_rolled<BN, D, kProducerThreads, LKV>(
          sV(st), v.ptr, p.v_row_stride, t * BN, v.len, wtid);
      cp_async_mbar_arrive(barV(st));
    }
    cp_async_wait_all(); // no copy outlives its thread
  } else {
    attn_consumer_sm90_ws<D, BM, BN, STAGES, PINGPONG>(p, k, out, m0, ntiles, sm);
  }
}

} // namespace trellis_attn
