// FP8 self-attention for Hopper (sm_90a), head dim 64: E4M3 Q, K, V and P
// with fp32 accumulation (TrellisAttnFp8Params, attention.h).
//
// Why K and V are prepared by a pre-pass: wgmma reads 8-bit operands
// K-major only, so the B operand of P V (V, keys x head dim) must be stored
// transposed; E4M3 needs a scale per tensor that is known before the first
// tile is multiplied; and every query tile reads all of K and V.
//   trellis_attn_fp8_v_amax    v_amax[h] = max |v| over the tokens of head h
//                              (v_amax zeroed first)
//   trellis_attn_fp8_prepare   k8 = E4M3(head-RMS-normalized fp16 k' times
//                              448 / (8 max|gamma_h|)): every |k'_e| <=
//                              sqrt(64) |gamma_e|, so nothing saturates;
//                              vt8 = E4M3(v * 448 / v_amax[h]), transposed to
//                              [heads, 64, padded tokens]
// q is read once per CTA: normalized in shared memory and quantized the same
// way (its own gamma) into the A fragments.
// The attention kernel is attention_sm90.cuh's FIXED_REF + ROWSUM_MMA +
// MBAR_PIPELINE loop with 8-bit operands (wgmma k32):
//   S_j = Q8 K8_j^T          (A = Q8 from registers, B = K8 tile, 64B swizzle)
//   P_j = E4M3(2^(S_j * c - ref_i))          c = scale * log2(e) / (s_q s_k)
//                            (ex2.approx)
//   O  += P_j [V8_j | 1]     (A = P from registers, B = the transposed V8 tile
//                            and 8 rows of ones: column 64 is the row sum of
//                            the P actually multiplied)
//   out = O[:, :64] / (O[:, 64] * s_v)
// The fixed reference ref_i = min(the largest logit of the first 64 keys,
// bound_i - 8): k is head-normalized, so |q_i . k_j| <= ||q8_i * gamma_k|| s_k
// sqrt(64) (1 + 2^-4) (Cauchy-Schwarz, E4M3's rounding of k) = bound_i, and
// where the reference is bound_i - 8 every P <= 2^8 < 448 (E4M3's largest
// value). Where it is the first keys' maximum, a later key more than 8 above
// it gives a P above 2^8, which may saturate: such a CTA writes 1 to
// p.redo_flags[CTA] instead of its output, and the fp16 online kernel of the
// same tile shape (attention_sm90.cuh, launched next with the same flags)
// recomputes exactly those CTAs. The row's largest P is >= 1; E4M3 keeps P
// down to 2^-9 (subnormal), so keys more than ~2^-10 below a row's largest
// weight count as zero.
//
// The P register fragment: wgmma's m64k32 8-bit A fragment holds, per thread,
// columns 4t..4t+3 and 16+4t..16+4t+3 of each 32-key step (t = lane % 4),
// while the S accumulator holds columns 2t, 2t+1, 8+2t, 9+2t, 16+2t, ...
// Instead of exchanging registers, P keeps the accumulator's order and the
// pre-pass stores V's keys in the matching order: within each 32 keys, the
// key at A column a = 16h + 4t + j is fp8_key_of_column(a) = 16h + 8(j/2) +
// 2t + (j % 2). The sum over keys does not depend on their order.
#pragma once

#include "runtime/kernels/attention_sm90.cuh"

#include <cuda_fp8.h>

namespace trellis_attn {

constexpr int kFp8HeadDim = 64;

// Four floats to E4M3 (round to nearest even, saturating), a0 in the lowest
// byte. cvt...e4m3x2 puts its first source in the upper byte.
__device__ __forceinline__ uint32_t pack_e4m3x4(float a0, float a1, float a2,
                                                float a3) {
  uint32_t r;
  asm("{\n.reg .b16 lo, hi;\n"
      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
      "mov.b32 %0, {lo, hi};\n}\n"
      : "=r"(r)
      : "f"(a0), "f"(a1), "f"(a2), "f"(a3));
  return r;
}

__device__ __forceinline__ float e4m3_to_float(uint8_t x) {
  __nv_fp8_e4m3 f;
  f.__x = x;
  return static_cast<float>(f);
}

// The key (within its 32) that the P fragment's column a multiplies.
__host__ __device__ __forceinline__ int fp8_key_of_column(int a) {
  const int h = (a >> 4) & 1, t = (a >> 2) & 3, j = a & 3;
  return (a & ~31) | (16 * h + 8 * (j >> 1) + 2 * t + (j & 1));
}

// 448 / (8 max|gamma_h|): the E4M3 scale of a head-normalized row.
__device__ __forceinline__ float fp8_head_scale_of_max(float max_abs_gamma) {
  return max_abs_gamma > 0.f ? 448.f / (8.f * max_abs_gamma) : 1.f;
}
__device__ __forceinline__ float fp8_head_scale(const float *gamma_h) {
  float m = 0.f;
#pragma unroll
  for (int e = 0; e < kFp8HeadDim; e += 4) {
    const float4 g = __ldg(reinterpret_cast<const float4 *>(gamma_h + e));
    m = fmaxf(
        m, fmaxf(fmaxf(fabsf(g.x), fabsf(g.y)), fmaxf(fabsf(g.z), fabsf(g.w))));
  }
  return fp8_head_scale_of_max(m);
}
__device__ __forceinline__ float fp8_v_scale(float amax) {
  return amax > 0.f ? 448.f / amax : 1.f;
}

// Segment b: its first token, its length, its first padded V column.
struct Fp8Segment {
  int start, len, pad_start;
};
__device__ __forceinline__ int fp8_round_up(int n) {
  return (n + TRELLIS_ATTN_FP8_PAD - 1) / TRELLIS_ATTN_FP8_PAD *
         TRELLIS_ATTN_FP8_PAD;
}
__device__ __forceinline__ Fp8Segment fp8_segment(const TrellisAttnFp8Params &p,
                                                  int b) {
  if (!p.cu_seqlens)
    return {b * p.seqlen, p.seqlen, b * fp8_round_up(p.seqlen)};
  int pad = 0;
  for (int i = 0; i < b; ++i)
    pad += fp8_round_up(__ldg(p.cu_seqlens + i + 1) - __ldg(p.cu_seqlens + i));
  const int s = __ldg(p.cu_seqlens + b);
  return {s, __ldg(p.cu_seqlens + b + 1) - s, pad};
}
// Row i of segment b, head h, of an fp16 view.
__device__ __forceinline__ const __half *
fp8_src_row(const void *base, int64_t batch_stride, int64_t row_stride,
            int64_t head_stride, bool varlen, const Fp8Segment &s, int b, int i,
            int h) {
  const int64_t off = varlen ? static_cast<int64_t>(s.start + i) * row_stride
                             : static_cast<int64_t>(b) * batch_stride +
                                   static_cast<int64_t>(i) * row_stride;
  return static_cast<const __half *>(base) + off +
         static_cast<int64_t>(h) * head_stride;
}

// ---- pre-pass 1: v_amax[h] (grid: ceil(tokens / 8), 256 threads). A block
// reads its 8 tokens' rows of v whole (heads x 64 contiguous halves where v
// is a view of a packed qkv), 8 lanes per (token, head).
constexpr int kFp8PrepThreads = TRELLIS_ATTN_FP8_PREP_THREADS;
constexpr int kFp8AmaxThreads = TRELLIS_ATTN_FP8_AMAX_THREADS;
constexpr int kFp8AmaxTokens = TRELLIS_ATTN_FP8_AMAX_TOKENS;
__device__ __forceinline__ void attn_fp8_v_amax(const TrellisAttnFp8Params &p) {
  extern __shared__ unsigned head_max[]; // [heads], float bits
  const int tid = threadIdx.x, chunks = p.heads * 8;
  for (int h = tid; h < p.heads; h += kFp8AmaxThreads)
    head_max[h] = 0u;
  __syncthreads();
  // a multiple of the block (8 * 64 * heads): every lane runs every
  // iteration, as the shuffles need
  const int total = kFp8AmaxTokens * chunks;
#pragma unroll 4
  for (int i = tid; i < total; i += kFp8AmaxThreads) {
    const int t = blockIdx.x * kFp8AmaxTokens + i / chunks; // token
    const int chunk = i % chunks, h = chunk / 8;
    float m = 0.f;
    if (t < p.tokens) {
      const int64_t row = p.cu_seqlens ? t * p.v_row_stride
                                       : (t / p.seqlen) * p.v_batch_stride +
                                             (t % p.seqlen) * p.v_row_stride;
      const uint4 x = *reinterpret_cast<const uint4 *>(
          static_cast<const __half *>(p.v) + row + h * p.v_head_stride +
          (chunk % 8) * 8);
      const __half2 *hx = reinterpret_cast<const __half2 *>(&x);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 f = __half22float2(hx[e]);
        m = fmaxf(m, fmaxf(fabsf(f.x), fabsf(f.y)));
      }
    }
    // the 8 lanes of one (token, head) are consecutive (8 divides 32)
#pragma unroll
    for (int s = 1; s < 8; s <<= 1)
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, s));
    // non-negative floats order as their bit patterns
    if ((tid & 7) == 0)
      atomicMax(head_max + h, __float_as_uint(m));
  }
  __syncthreads();
  for (int h = tid; h < p.heads; h += kFp8AmaxThreads) {
    atomicMax(reinterpret_cast<unsigned *>(p.v_amax + h), head_max[h]);
    if (p.v_amax_running) // calibration
      atomicMax(reinterpret_cast<unsigned *>(p.v_amax_running + h),
                head_max[h]);
  }
}

// Eight lanes per 64-wide row (lane c holds halves 8c .. 8c+7, g its 8
// gains): the head RMS norm of q or k (rmsnorm_chunk: the fp16 result TRELLIS
// multiplies) times `scale`, as 8 E4M3 bytes. Every lane of the 8 must call
// it (shuffles).
__device__ __forceinline__ uint2 fp8_norm_chunk(uint4 x, const float (&g)[8],
                                                float scale) {
  float ss = sumsq_chunk(x);
#pragma unroll
  for (int m = 1; m < 8; m <<= 1)
    ss += __shfl_xor_sync(0xffffffffu, ss, m);
  return trellis_fp8_quantize8(rmsnorm_chunk(x, rms_inv(ss), g, 8.f), scale);
}

// Four 4-byte words w[k] -> four words o[r] with byte k of o[r] = byte r of
// w[k] (a 4 x 4 byte transpose, eight byte permutes).
__device__ __forceinline__ void transpose4x4_bytes(const uint32_t (&w)[4],
                                                   uint32_t (&o)[4]) {
  const uint32_t t0 =
      __byte_perm(w[0], w[1], 0x5140); // w0.b0 w1.b0 w0.b1 w1.b1
  const uint32_t t1 =
      __byte_perm(w[0], w[1], 0x7362); // w0.b2 w1.b2 w0.b3 w1.b3
  const uint32_t t2 = __byte_perm(w[2], w[3], 0x5140);
  const uint32_t t3 = __byte_perm(w[2], w[3], 0x7362);
  o[0] = __byte_perm(t0, t2, 0x5410);
  o[1] = __byte_perm(t0, t2, 0x7632);
  o[2] = __byte_perm(t1, t3, 0x5410);
  o[3] = __byte_perm(t1, t3, 0x7632);
}

// ---- pre-pass 2: k8, vt8 (grid: padded_tokens / 128 x heads, 256
// threads: 8 lanes per key, 32 keys per pass over the block's 128 keys; then
// each thread transposes 4 head-dim rows x 8 columns of the block's E4M3 v)
__device__ __forceinline__ void
attn_fp8_prepare(const TrellisAttnFp8Params &p) {
  constexpr int T = TRELLIS_ATTN_FP8_PAD;
  constexpr int D = kFp8HeadDim;
  constexpr int kRowsPerPass = kFp8PrepThreads / 8;
  static_assert(kFp8PrepThreads == (D / 4) * (T / 8),
                "one thread per 4 rows x 8 columns of vt8");
  // E4M3 v, one 68-byte row per key (17 words: fewer bank conflicts for
  // the transpose's word reads than 64 or 72)
  constexpr int kSvWords = D / 4 + 1;
  __shared__ uint32_t sv[T * kSvWords];
  const int h = blockIdx.y, tid = threadIdx.x, c = tid % 8;
  const int col0 = blockIdx.x * T; // first padded column of this block
  // the segment holding the block
  int b = 0;
  Fp8Segment seg;
  if (!p.cu_seqlens) {
    b = col0 / fp8_round_up(p.seqlen);
    seg = fp8_segment(p, b);
  } else {
    seg = fp8_segment(p, 0);
    while (b + 1 < p.num_seqs && col0 >= seg.pad_start + fp8_round_up(seg.len))
      seg = fp8_segment(p, ++b);
  }
  const bool varlen = p.cu_seqlens != nullptr;
  const float *gk = p.k_gamma + h * D;
  const float sv_scale = fp8_v_scale(__ldg(p.v_amax + h));
  // Every row's k and v loaded before the first store: the compiler cannot
  // move a load above a store to k8 (they might alias), and one memory
  // latency per row would dominate the kernel.
  constexpr int kRows = T / kRowsPerPass;
  uint4 kx[kRows], vx[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const int i = col0 - seg.pad_start + tid / 8 + j * kRowsPerPass;
    kx[j] = vx[j] = make_uint4(0u, 0u, 0u, 0u);
    if (i < seg.len) { // a token of the segment, not padding
      kx[j] = *reinterpret_cast<const uint4 *>(
          fp8_src_row(p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride,
                      varlen, seg, b, i, h) +
          c * 8);
      vx[j] = *reinterpret_cast<const uint4 *>(
          fp8_src_row(p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride,
                      varlen, seg, b, i, h) +
          c * 8);
    }
  }
  const float4 g0 = __ldg(reinterpret_cast<const float4 *>(gk + c * 8));
  const float4 g1 = __ldg(reinterpret_cast<const float4 *>(gk + c * 8 + 4));
  const float g[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
  // the head's scale (fp8_head_scale) from the 8 lanes' gains
  float gmax = 0.f;
#pragma unroll
  for (int e = 0; e < 8; ++e)
    gmax = fmaxf(gmax, fabsf(g[e]));
#pragma unroll
  for (int m = 1; m < 8; m <<= 1)
    gmax = fmaxf(gmax, __shfl_xor_sync(0xffffffffu, gmax, m));
  const float sk = fp8_head_scale_of_max(gmax);
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const int r = tid / 8 + j * kRowsPerPass;
    const int i = col0 - seg.pad_start + r; // token within the segment
    // every lane joins the norms' shuffles; only a row of the segment stores
    const uint2 k8 = fp8_norm_chunk(kx[j], g, sk);
    if (i < seg.len) {
      const int64_t dst =
          (static_cast<int64_t>(h) * p.tokens + seg.start + i) * D + c * 8;
      *reinterpret_cast<uint2 *>(p.k8 + dst) = k8;
    }
    const uint2 v8 = trellis_fp8_quantize8(vx[j], sv_scale); // 0 past the end
    sv[r * kSvWords + 2 * c] = v8.x;
    sv[r * kSvWords + 2 * c + 1] = v8.y;
  }
  __syncthreads();
  // vt8 rows 4g .. 4g+3, this block's columns 8o .. 8o+7 (a warp's 16
  // lanes of one g store 128 contiguous bytes of each row), in the P
  // fragment's key order: columns a .. a+3 (a a multiple of 4) hold keys
  // k0, k0 + 1, k0 + 8, k0 + 9, k0 = fp8_key_of_column(a)
  const int o = tid % 16, gq = tid / 16;
  uint32_t out[4][2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int k0 = fp8_key_of_column(8 * o + 4 * half);
    const uint32_t w[4] = {sv[k0 * kSvWords + gq], sv[(k0 + 1) * kSvWords + gq],
                           sv[(k0 + 8) * kSvWords + gq],
                           sv[(k0 + 9) * kSvWords + gq]};
    uint32_t t[4];
    transpose4x4_bytes(w, t);
#pragma unroll
    for (int r = 0; r < 4; ++r)
      out[r][half] = t[r];
  }
#pragma unroll
  for (int r = 0; r < 4; ++r)
    *reinterpret_cast<uint2 *>(
        p.vt8 + (static_cast<int64_t>(h) * D + 4 * gq + r) * p.padded_tokens +
        col0 + 8 * o) = make_uint2(out[r][0], out[r][1]);
}

// ---- the attention kernel (grid: num_seqs * ceil(seqlen / BM) x heads, BM * 2
// threads)

template <int BM, int BN, int STAGES>
__device__ __forceinline__ void attn_fp8_sm90(const TrellisAttnFp8Params &p) {
  constexpr int D = kFp8HeadDim;
  constexpr int NWG = BM / 64;
  constexpr int THREADS = NWG * 128;
  constexpr int WV = BN; // V^T rows are BN bytes: 64- or 128-byte swizzle
  constexpr int kKBytes = BN * D;
  constexpr int kVRows = D + 8; // + 8 rows of ones: the row sums
  constexpr int kStageBytes = kKBytes + kVRows * BN;
  constexpr int PSTEPS = BN / 32;
  constexpr int DO = D + 8;
  static_assert(BN == 64 || BN == 128, "keys per tile: 64 or 128");
  static_assert(STAGES >= 3, "the ring needs >= 3 stages");
  using LQ = SwizzleW<128, BM>; // fp16 Q, normalized in place; later O
  using LK = SwizzleW<64, BN>;
  using LV = SwizzleW<WV, kVRows>;

  extern __shared__ uint8_t smem_raw[];
  const uint32_t sbase = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t sQ = sbase;
  const uint32_t sStages = sbase + BM * D * 2;
  auto sK = [&](int st) { return sStages + st * kStageBytes; };
  auto sV = [&](int st) { return sStages + st * kStageBytes + kKBytes; };
  const uint32_t sBar = sStages + STAGES * kStageBytes;
  const MbarRing<STAGES, THREADS> ring{sBar};

  const int tid = threadIdx.x, wtid = tid & 127, lane = tid & 31;
  const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
  const int wrow = (wtid >> 5) * 16 + (lane >> 2);
  const int tiles = (p.seqlen + BM - 1) / BM;
  const int b = blockIdx.x / tiles, m0 = (blockIdx.x % tiles) * BM,
            h = blockIdx.y;
  const Fp8Segment seg = fp8_segment(p, b);
  int32_t *redo_flag = p.redo_flags + blockIdx.y * gridDim.x + blockIdx.x;
  if (m0 >= seg.len) {
    if (tid == 0)
      *redo_flag = 0;
    return;
  }
  const Seq out = make_seq(p.o, p.cu_seqlens, p.o_batch_stride, p.o_row_stride,
                           p.o_head_stride, p.seqlen, b, h);
  const int ntiles = (seg.len + BN - 1) / BN;

  // fp16 q rows of this head and segment; the E4M3 k rows, as 32-"half" rows
  // for the copy helpers
  const __half *q16 =
      fp8_src_row(p.q, p.q_batch_stride, p.q_row_stride, p.q_head_stride,
                  p.cu_seqlens != nullptr, seg, b, 0, h);
  const __half *k8 = reinterpret_cast<const __half *>(
      p.k8 + (static_cast<int64_t>(h) * p.tokens + seg.start) * D);
  const uint8_t *vt8 =
      p.vt8 + static_cast<int64_t>(h) * D * p.padded_tokens + seg.pad_start;
  using KStream = TileStream<BN, D / 2, THREADS, LK>;
  KStream kStream(k8, D / 2, seg.len, tid);
  constexpr int kVChunks = D * (BN / 16);
  auto load_kv = [&](int j, int st) {
    kStream.load(sK(st));
#pragma unroll
    for (int i0 = 0; i0 < kVChunks; i0 += THREADS) {
      const int i = i0 + tid;
      if (kVChunks % THREADS == 0 || i < kVChunks) {
        const int n = i / (BN / 16), c = i % (BN / 16);
        cp_async_16(sV(st) + LV::off(n, c),
                    vt8 + static_cast<int64_t>(n) * p.padded_tokens + j * BN +
                        c * 16,
                    true);
      }
    }
  };

  // the ones rows (E4M3 1.0 = 0x38) of every stage, for the async proxy
  for (int i = tid; i < STAGES * 8 * (BN / 16); i += THREADS) {
    const int st = i / (8 * (BN / 16)), rc = i % (8 * (BN / 16));
    sts128(sV(st) + LV::off(D + rc / (BN / 16), rc % (BN / 16)),
           make_uint4(0x38383838u, 0x38383838u, 0x38383838u, 0x38383838u));
  }
  fence_proxy_async_smem();
  ring.init(tid);
  load_tile<BM, D, THREADS, LQ>(sQ, q16, p.q_row_stride, m0, seg.len, tid);
  load_kv(0, 0);
  cp_async_mbar_arrive(ring.full(0));
#pragma unroll
  for (int t = 1; t <= STAGES - 3; ++t) {
    if (t < ntiles)
      load_kv(t, t);
    cp_async_mbar_arrive(ring.full(t));
  }

  const float s_q = fp8_head_scale(p.q_gamma + h * D);
  const float s_k = fp8_head_scale(p.k_gamma + h * D);
  const float v_amax = __ldg(p.v_amax + h);
  // logits in log2 units from the E4M3 products
  const float sl2 = p.softmax_scale * 1.4426950408889634f / (s_q * s_k);
  float o[DO / 2];
#pragma unroll
  for (int i = 0; i < DO / 2; ++i)
    o[i] = 0.f;
  float s[BN / 2];
  uint32_t qf[D / 32][4];
  uint32_t pf[PSTEPS][4];
  float ref2[2];

  auto begin_tile = [&](int j) {
    ring.wait_full(j);
    fence_proxy_async_smem();
    ring.refill(j, ntiles, load_kv);
  };
  const uint64_t descK0 = smem_desc<64>(sK(0), 16, 8 * 64);
  const uint64_t descV0 = smem_desc<WV>(sV(0), 16, 8 * WV);
  auto issue_qk = [&](int j) {
    const uint64_t kb = descK0 + uint64_t((j % STAGES) * (kStageBytes >> 4));
#pragma unroll
    for (int kk = 0; kk < D / 32; ++kk)
      wgmma_rs_e4m3<BN>(s, qf[kk], kb + (kk * 32) / 16, kk > 0);
    wgmma_commit();
  };
  auto issue_pv = [&](int j) {
    const uint64_t vb = descV0 + uint64_t((j % STAGES) * (kStageBytes >> 4));
#pragma unroll
    for (int kk = 0; kk < PSTEPS; ++kk)
      wgmma_rs_e4m3<DO>(o, pf[kk], vb + (kk * 32) / 16, 1);
    wgmma_commit();
  };
  // The largest logit of this thread's row r over the tile's first 64 keys
  // (the reference depends on no tile shape: the CPU reference's emulation
  // uses the same keys).
  auto row_max = [&](int r) {
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < 64 / 8; ++i)
      mx = fmaxf(mx, fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    return fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  };
  // The bound on this thread's rows' logits (log2 units): ||q8_i * gamma_k||
  // s_k sqrt(64) (1 + 2^-4), with margin for the fp16 rounding of k'; from
  // the E4M3 q in qf (a quad holds a row's 64 values).
  float bound2[2];
  auto row_bounds = [&]() {
    const float *gk = p.k_gamma + h * D;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float qq = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 32; ++kk)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const uint32_t w = qf[kk][2 * half + r];
          const int c0 = kk * 32 + half * 16 + 4 * (lane & 3);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float a =
                e4m3_to_float(uint8_t(w >> (8 * e))) * __ldg(gk + c0 + e);
            qq = fmaf(a, a, qq);
          }
        }
      qq += __shfl_xor_sync(0xffffffffu, qq, 1);
      qq += __shfl_xor_sync(0xffffffffu, qq, 2);
      bound2[r] = sqrtf(qq * static_cast<float>(D)) * s_k * sl2 * 1.07f;
    }
  };
  auto softmax = [&](int j) {
    if ((j + 1) * BN > seg.len) { // columns past the end
      const int cbase = j * BN + 2 * (lane & 3);
#pragma unroll
      for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (cbase + i * 8 + (e & 1) >= seg.len)
            s[4 * i + e] = -INFINITY;
      }
    }
    if (j == 0) {
#pragma unroll
      for (int r = 0; r < 2; ++r)
        ref2[r] = fminf(row_max(r) * sl2, bound2[r] - 8.f);
    }
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) { // s[2i], s[2i+1]: row i & 1
      s[2 * i] = fast_exp2(fmaf(s[2 * i], sl2, -ref2[i & 1]));
      s[2 * i + 1] = fast_exp2(fmaf(s[2 * i + 1], sl2, -ref2[i & 1]));
    }
  };
  // P > 2^8 (a byte above 0x78: a later key's logit more than 8 above the
  // reference, which may have saturated at 448) sets bit 7 of its byte in
  // `above`: P >= 0, so adding 7 to each byte never carries.
  uint32_t above = 0;
  auto pack = [&]() {
#pragma unroll
    for (int kk = 0; kk < PSTEPS; ++kk) {
      const float *q = s + 16 * kk;
      pf[kk][0] = pack_e4m3x4(q[0], q[1], q[4], q[5]);
      pf[kk][1] = pack_e4m3x4(q[2], q[3], q[6], q[7]);
      pf[kk][2] = pack_e4m3x4(q[8], q[9], q[12], q[13]);
      pf[kk][3] = pack_e4m3x4(q[10], q[11], q[14], q[15]);
#ifndef TRELLIS_FP8_PROBE_NO_DETECT // the detection's cost (fp8_probe.cu)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        above |= pf[kk][i] + 0x07070707u;
#endif
    }
  };

  begin_tile(0);
  // q: the head RMS norm in place (each thread its own copied chunks), then
  // this thread's A fragments in E4M3: rows r, r + 8, columns 4t .. 4t+3
  // and 16 + 4t .. 16 + 4t+3 of each 32
  rmsnorm_tile<BM, D, THREADS, LQ>(sQ, p.q_gamma + h * D, tid);
  __syncthreads();
#pragma unroll
  for (int kk = 0; kk < D / 32; ++kk)
#pragma unroll
    for (int reg = 0; reg < 4; ++reg) {
      const int r = wg * 64 + wrow + 8 * (reg & 1);
      const int c = kk * 32 + 16 * (reg >> 1) + 4 * (lane & 3);
      const uint32_t addr = sQ + LQ::off(r, c >> 3) + (c & 7) * 2;
      uint32_t hv[2] = {lds32(addr), lds32(addr + 4)};
      const __half2 *h2 = reinterpret_cast<const __half2 *>(hv);
      const float2 a = __half22float2(h2[0]), bb = __half22float2(h2[1]);
      qf[kk][reg] = pack_e4m3x4(a.x * s_q, a.y * s_q, bb.x * s_q, bb.y * s_q);
    }
  row_bounds();
  {
    wgmma_fence();
    issue_qk(0);
    wgmma_wait<0>();
    fence_regs<BN / 2>(s);
    softmax(0);
    pack();
  }
  for (int j = 1; j < ntiles; ++j) {
    begin_tile(j);
    wgmma_fence();
    issue_qk(j);
    issue_pv(j - 1);
    wgmma_wait<1>();
    fence_regs<BN / 2>(s);
    softmax(j);
    wgmma_wait<0>();
    mbar_arrive(ring.empty((j - 1) % STAGES));
    fence_regs<DO / 2>(o);
    fence_regs<PSTEPS * 4>(&pf[0][0]);
    pack();
  }
  wgmma_fence();
  issue_pv(ntiles - 1);
  wgmma_wait<0>();
  fence_regs<DO / 2>(o);

  // epilogue: O / (l s_v) -> fp16 -> this warpgroup's rows of sQ -> global
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = o[D / 2 + 2 * r];
    inv[r] = l > 0.f ? (v_amax / 448.f) / l : 0.f;
    if (!(v_amax > 0.f))
      inv[r] = l > 0.f ? 1.f / l : 0.f; // v all zeros: scale 1
  }
  // A P above 2^8: the fp16 online kernel redoes this CTA (its flag);
  // also the barrier before sQ holds O.
  const int redo = __syncthreads_or((above & 0x80808080u) != 0);
  if (tid == 0)
    *redo_flag = redo;
  if (redo)
    return;
  store_o_tile<BM, D, THREADS, LQ>(sQ, o, inv, wg, wrow, lane, p.o, out,
                                   p.o_row_stride, m0, p.o_quantize, tid);
}

} // namespace trellis_attn

#define TRELLIS_ATTN_FP8_DEFINE(BM, BN, ST)                                    \
  extern "C" __global__ void __launch_bounds__((BM)*2, 1)                      \
      trellis_attn_fp8_sm90_d64_m##BM##_n##BN##_s##ST(                         \
          const __grid_constant__ TrellisAttnFp8Params p) {                    \
    trellis_attn::attn_fp8_sm90<BM, BN, ST>(p);                                \
  }
#define TRELLIS_ATTN_FP8_PREPARE_DEFINE()                                      \
  extern "C" __global__ void __launch_bounds__(trellis_attn::kFp8AmaxThreads)  \
      trellis_attn_fp8_v_amax_d64(                                             \
          const __grid_constant__ TrellisAttnFp8Params p) {                    \
    trellis_attn::attn_fp8_v_amax(p);                                          \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(trellis_attn::kFp8PrepThreads)  \
      trellis_attn_fp8_prepare_d64(                                            \
          const __grid_constant__ TrellisAttnFp8Params p) {                    \
    trellis_attn::attn_fp8_prepare(p);                                         \
  }
