// Flash-attention forward, portable path: mma.sync (m16n8k16 on sm_80+, 2 x
// m16n8k8 on sm_75), ldmatrix from padded shared memory, cp.async double
// buffering (sm_80+).
//
// CTA = NWARPS warps; each warp owns 16 query rows (BM = 16 * NWARPS). K/V
// tiles of BN keys. S = Q K^T and O += P V accumulate in fp32 registers; P is
// rounded to fp16 for the second product (as every fp16 flash-attention kernel
// does); the softmax statistics stay fp32.
#pragma once

#include "runtime/kernels/attention_common.cuh"

namespace trellis_attn {

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4],
                                                  uint32_t addr) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr));
}

// c += a (16x16, row) * b (16x8, col); fragments as in the PTX ISA for
// mma.m16n8k16.
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4],
                                          uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, "
               "%3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  // m16n8k16 = m16n8k8 over k 0..7 (a0, a1, b0) + m16n8k8 over k 8..15 (a2, a3,
  // b1).
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, "
               "%3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(b0));
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, "
               "%3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[2]), "r"(a[3]), "r"(b1));
#endif
}

template <int D, int BM, int BN, int STAGES>
__device__ __forceinline__ void attn_fwd_sm80(const TrellisAttnParams &p) {
  constexpr int NWARPS = BM / 16;
  constexpr int THREADS = NWARPS * 32;
  constexpr int LDS = (D + 8) * 2; // row bytes
  constexpr int kQBytes = BM * LDS;
  constexpr int kKVBytes = BN * LDS;
  constexpr int KSTEPS = D / 16; // k16 steps of Q K^T
  constexpr int NT = BN / 8;     // n8 tiles of S
  constexpr int DT = D / 8;      // n8 tiles of O
  static_assert(D % 16 == 0 && BN % 16 == 0 && BM % 16 == 0, "tile shape");
  static_assert(STAGES == 1 || STAGES == 2, "stages");
  using L = Padded<D>;

  extern __shared__ __align__(128) uint8_t smem_raw[];
  const uint32_t sQ = smem_u32(smem_raw);
  const uint32_t sKV =
      sQ + kQBytes; // stage s: K at sKV + 2s*kKVBytes, V after it

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
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
  const int ntiles = (k.len + BN - 1) / BN;
  const bool norm_q = p.q_gamma != nullptr, norm_k = p.k_gamma != nullptr;
  const float *gq = norm_q ? p.q_gamma + h * D : nullptr;
  const float *gk = norm_k ? p.k_gamma + h * D : nullptr;

  auto load_kv = [&](int j, int stage) {
    const uint32_t sk = sKV + 2 * stage * kKVBytes;
    load_tile<BN, D, THREADS, L>(sk, k.ptr, p.k_row_stride, j * BN, k.len, tid);
    load_tile<BN, D, THREADS, L>(sk + kKVBytes, v.ptr, p.v_row_stride, j * BN,
                                 v.len, tid);
  };

  load_tile<BM, D, THREADS, L>(sQ, q.ptr, p.q_row_stride, m0, q.len, tid);
  if (STAGES == 2 && ntiles > 0)
    load_kv(0, 0);
  cp_async_commit();

  const float sl2 = p.softmax_scale * 1.4426950408889634f; // scale * log2(e)
  float m_row[2] = {-INFINITY, -INFINITY};
  float l_row[2] = {0.f, 0.f};
  float o[DT][4];
#pragma unroll
  for (int i = 0; i < DT; ++i)
    o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  uint32_t qf[KSTEPS][4];

  for (int j = 0; j < ntiles; ++j) {
    const int stage = STAGES == 2 ? (j & 1) : 0;
    if (STAGES == 1) {
      if (j > 0)
        __syncthreads(); // everyone is done with the previous tile
      load_kv(j, 0);
      cp_async_commit();
    }
    cp_async_wait<0>();
    const uint32_t sK = sKV + 2 * stage * kKVBytes, sV = sK + kKVBytes;
    if (kRmsOwnChunks<D> &&
        (norm_q || norm_k)) { // each thread normalizes the chunks it copied
      if (norm_q && j == 0)
        rmsnorm_tile<BM, D, THREADS, L>(sQ, gq, tid);
      if (norm_k)
        rmsnorm_tile<BN, D, THREADS, L>(sK, gk, tid);
    }
    __syncthreads();
    if (!kRmsOwnChunks<D> && (norm_q || norm_k)) {
      if (norm_q && j == 0)
        rmsnorm_tile<BM, D, THREADS, L>(sQ, gq, tid);
      if (norm_k)
        rmsnorm_tile<BN, D, THREADS, L>(sK, gk, tid);
      __syncthreads();
    }
    if (STAGES == 2) {
      if (j + 1 < ntiles)
        load_kv(j + 1, stage ^ 1);
      cp_async_commit();
    }
    if (j == 0) {
#pragma unroll
      for (int kk = 0; kk < KSTEPS; ++kk) {
        const int mat = lane >> 3;
        const int row = warp * 16 + (mat & 1) * 8 + (lane & 7);
        ldmatrix_x4(qf[kk], sQ + row * LDS + (kk * 16 + (mat >> 1) * 8) * 2);
      }
    }

    // S = Q K^T (16 x BN per warp)
    float s[NT][4];
#pragma unroll
    for (int i = 0; i < NT; ++i)
      s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
#pragma unroll
      for (int n2 = 0; n2 < NT / 2; ++n2) {
        const int mat = lane >> 3;
        const int key = n2 * 16 + (mat >> 1) * 8 + (lane & 7);
        uint32_t b[4];
        ldmatrix_x4(b, sK + key * LDS + (kk * 16 + (mat & 1) * 8) * 2);
        mma_16816(s[2 * n2], qf[kk], b[0], b[1]);
        mma_16816(s[2 * n2 + 1], qf[kk], b[2], b[3]);
      }
    }

    // online softmax; this thread holds rows (lane/4) and (lane/4 + 8) of the
    // warp's 16
    if ((j + 1) * BN > k.len) {
      const int cbase = j * BN + 2 * (lane & 3);
#pragma unroll
      for (int i = 0; i < NT; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (cbase + i * 8 + (e & 1) >= k.len)
            s[i][e] = -INFINITY;
      }
    }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m_row[r];
#pragma unroll
      for (int i = 0; i < NT; ++i)
        mx = fmaxf(mx, fmaxf(s[i][2 * r], s[i][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float ms = (mx == -INFINITY) ? 0.f : mx * sl2;
      alpha[r] = fast_exp2(m_row[r] * sl2 - ms);
      m_row[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        s[i][2 * r] = fast_exp2(fmaf(s[i][2 * r], sl2, -ms));
        s[i][2 * r + 1] = fast_exp2(fmaf(s[i][2 * r + 1], sl2, -ms));
        sum += s[i][2 * r] + s[i][2 * r + 1];
      }
      l_row[r] = l_row[r] * alpha[r] +
                 sum; // per-thread partial; reduced over the quad at the end
    }
#pragma unroll
    for (int i = 0; i < DT; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }

    // O += P V
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t a[4];
      a[0] = pack_half2(s[2 * kk][0], s[2 * kk][1]);
      a[1] = pack_half2(s[2 * kk][2], s[2 * kk][3]);
      a[2] = pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      a[3] = pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int d2 = 0; d2 < DT / 2; ++d2) {
        const int mat = lane >> 3;
        const int key = kk * 16 + (mat & 1) * 8 + (lane & 7);
        uint32_t b[4];
        ldmatrix_x4_trans(b, sV + key * LDS + (d2 * 16 + (mat >> 1) * 8) * 2);
        mma_16816(o[2 * d2], a, b[0], b[1]);
        mma_16816(o[2 * d2 + 1], a, b[2], b[3]);
      }
    }
  }
  cp_async_wait<0>();

  // epilogue: O / l -> fp16 -> this warp's 16 rows of sQ -> global
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_row[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    inv[r] = l > 0.f ? 1.f / l : 0.f;
  }
  __syncthreads(); // all warps are past their reads of sQ / sKV
  const int r0 = warp * 16 + (lane >> 2);
#pragma unroll
  for (int i = 0; i < DT; ++i) {
    const int col = i * 8 + 2 * (lane & 3);
    sts32(sQ + r0 * LDS + col * 2,
          pack_half2(o[i][0] * inv[0], o[i][1] * inv[0]));
    sts32(sQ + (r0 + 8) * LDS + col * 2,
          pack_half2(o[i][2] * inv[1], o[i][3] * inv[1]));
  }
  __syncthreads();
  const Seq out = make_seq(p.o, p.cu_seqlens_q, p.o_batch_stride,
                           p.o_row_stride, p.o_head_stride, p.seqlen_q, seq, h);
  store_tile<BM, D, THREADS, L>(sQ, const_cast<__half *>(out.ptr),
                                p.o_row_stride, m0, out.len, tid);
}

} // namespace trellis_attn
