//===- Attention.cpp - dense, segmented and sparse cross attention --------===//
//
// softmax(scale·q·kᵀ)·v with f32 scores, f32 softmax and f32 accumulation
// (spec §3.6, §6.5, §7.1; flash-attn accumulates in f32 as well). Each query
// (row, head) is computed by one thread over its keys in ascending order.
//
// The FP8 self-attention (attentionFp8, sparseAttentionFp8: the model of
// runtime/kernels/attention_fp8_sm90.cuh) has one implementation for both,
// attendE4M3, on sequences of token rows.
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/Common.h"

#include "trellis/Reference/Fp8.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trellis::ref {
using namespace detail;

namespace {
/// q, k and v are float tensors (the error names the one that is not).
Status expectFloatQkv(const char *op, const HostTensor &q, const HostTensor &k,
                      const HostTensor &v) {
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "q", q));
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "k", k));
  return expectFloat(op, "v", v);
}
} // namespace

Result<HostTensor> attention(const HostTensor &q, const HostTensor &k,
                             const HostTensor &v, float scale) {
  const char *op = "attention";
  TRELLIS_RETURN_IF_ERROR(expectFloatQkv(op, q, k, v));
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4 || k.dim(0) != q.dim(0) ||
      v.dim(0) != q.dim(0) || k.dim(2) != q.dim(2) || v.dim(2) != q.dim(2) ||
      k.dim(3) != q.dim(3) || v.dim(1) != k.dim(1))
    return opError(op, "needs q [B, Lq, H, d], k [B, Lk, H, d], v [B, Lk, H, "
                       "dv], got " +
                           describe(q) + ", " + describe(k) + ", " +
                           describe(v));
  const int64_t B = q.dim(0), Lq = q.dim(1), H = q.dim(2), d = q.dim(3);
  const int64_t Lk = k.dim(1), dv = v.dim(3);
  FloatView vq(q), vk(k), vv(v);
  FloatOut out(q.dtype(), {B, Lq, H, dv});
  parallelFor(B * Lq * H,
              std::max<int64_t>(1, 4096 / std::max<int64_t>(1, Lk * d)),
              [&](int64_t begin, int64_t end) {
                std::vector<const float *> keys(static_cast<size_t>(Lk)),
                    vals(static_cast<size_t>(Lk));
                std::vector<float> scratch(static_cast<size_t>(Lk)),
                    o(static_cast<size_t>(dv));
                for (int64_t item = begin; item < end; ++item) {
                  int64_t h = item % H, b = item / (Lq * H);
                  for (int64_t j = 0; j < Lk; ++j) {
                    keys[size_t(j)] = vk.data() + ((b * Lk + j) * H + h) * d;
                    vals[size_t(j)] = vv.data() + ((b * Lk + j) * H + h) * dv;
                  }
                  attendOne(vq.data() + item * d, d, dv, scale, Lk, keys.data(),
                            vals.data(), o.data(), scratch.data());
                  for (int64_t c = 0; c < dv; ++c)
                    out.set(item * dv + c, o[size_t(c)]);
                }
              });
  return out.take();
}

namespace {

Status checkRowTensors(const char *op, const HostTensor &q, const HostTensor &k,
                       const HostTensor &v) {
  TRELLIS_RETURN_IF_ERROR(expectFloatQkv(op, q, k, v));
  if (q.rank() != 3 || k.shape() != q.shape() || v.rank() != 3 ||
      v.dim(0) != q.dim(0) || v.dim(1) != q.dim(1))
    return opError(op, "needs q, k [N, H, d] and v [N, H, dv], got " +
                           describe(q) + ", " + describe(k) + ", " +
                           describe(v));
  return Status::ok();
}

/// Checks that `seg` partitions the N rows: offsets ascend from 0 to N and
/// every row appears exactly once.
Status checkSegments(const char *op, const Segments &seg, int64_t N) {
  if (seg.rows.dtype() != DType::I32 || seg.rows.rank() != 1 ||
      seg.offsets.dtype() != DType::I32 || seg.offsets.rank() != 1 ||
      seg.offsets.dim(0) < 1)
    return opError(op, "segments need int32 rows [N] and offsets [S + 1], "
                       "got rows " +
                           describe(seg.rows) + ", offsets " +
                           describe(seg.offsets));
  if (seg.rows.dim(0) != N)
    return opError(op, "segments cover " + std::to_string(seg.rows.dim(0)) +
                           " rows, the tensors have " + std::to_string(N));
  const int32_t *off = seg.offsets.data<int32_t>();
  int64_t S = seg.numSegments();
  if (off[0] != 0 || off[S] != N)
    return opError(op, "segment offsets must run from 0 to N");
  for (int64_t s = 0; s < S; ++s)
    if (off[s + 1] < off[s])
      return opError(op, "segment offsets must not decrease");
  std::vector<char> seen(size_t(N), 0);
  const int32_t *rows = seg.rows.data<int32_t>();
  for (int64_t p = 0; p < N; ++p) {
    if (rows[p] < 0 || rows[p] >= N || seen[size_t(rows[p])])
      return opError(op, "segment rows must be a permutation of 0..N-1");
    seen[size_t(rows[p])] = 1;
  }
  return Status::ok();
}

} // namespace

Result<HostTensor> sparseAttention(const HostTensor &q, const HostTensor &k,
                                   const HostTensor &v,
                                   const Segments &segments, float scale) {
  const char *op = "sparse.attention";
  TRELLIS_RETURN_IF_ERROR(checkRowTensors(op, q, k, v));
  const int64_t N = q.dim(0), H = q.dim(1), d = q.dim(2), dv = v.dim(2);
  TRELLIS_RETURN_IF_ERROR(checkSegments(op, segments, N));
  const int32_t *rows = segments.rows.data<int32_t>();
  const int32_t *off = segments.offsets.data<int32_t>();
  // Segment of every position in `rows`.
  std::vector<int64_t> segOf(static_cast<size_t>(N));
  for (int64_t s = 0; s < segments.numSegments(); ++s)
    for (int64_t p = off[s]; p < off[s + 1]; ++p)
      segOf[size_t(p)] = s;
  FloatView vq(q), vk(k), vv(v);
  FloatOut out(q.dtype(), {N, H, dv});
  parallelFor(N * H, 64, [&](int64_t begin, int64_t end) {
    std::vector<const float *> keys, vals;
    std::vector<float> scratch, o(static_cast<size_t>(dv));
    for (int64_t item = begin; item < end; ++item) {
      int64_t p = item / H, h = item % H;
      int64_t s = segOf[size_t(p)];
      int64_t len = off[s + 1] - off[s];
      keys.resize(static_cast<size_t>(len));
      vals.resize(static_cast<size_t>(len));
      scratch.resize(static_cast<size_t>(len));
      for (int64_t j = 0; j < len; ++j) {
        int64_t r = rows[off[s] + j];
        keys[size_t(j)] = vk.data() + (r * H + h) * d;
        vals[size_t(j)] = vv.data() + (r * H + h) * dv;
      }
      int64_t row = rows[p];
      attendOne(vq.data() + (row * H + h) * d, d, dv, scale, len, keys.data(),
                vals.data(), o.data(), scratch.data());
      for (int64_t c = 0; c < dv; ++c)
        out.set((row * H + h) * dv + c, o[size_t(c)]);
    }
  });
  return out.take();
}

Result<HostTensor> sparseCrossAttention(const HostTensor &q,
                                        const HostTensor &k,
                                        const HostTensor &v,
                                        const CoordSet &coords, float scale) {
  const char *op = "sparse.cross_attention";
  TRELLIS_RETURN_IF_ERROR(expectFloatQkv(op, q, k, v));
  const int64_t B = coords.batchSize();
  if (q.rank() != 3 || q.dim(0) != coords.size() || k.rank() != 4 ||
      v.rank() != 4 || k.dim(0) != B || v.dim(0) != B || k.dim(2) != q.dim(1) ||
      k.dim(3) != q.dim(2) || v.dim(1) != k.dim(1) || v.dim(2) != q.dim(1))
    return opError(
        op,
        "needs q [N, H, d] (N = " + std::to_string(coords.size()) +
            "), k [B, Lc, H, d], v [B, Lc, H, dv] (B = " + std::to_string(B) +
            "), got " + describe(q) + ", " + describe(k) + ", " + describe(v));
  const int64_t N = q.dim(0), H = q.dim(1), d = q.dim(2);
  const int64_t Lc = k.dim(1), dv = v.dim(3);
  FloatView vq(q), vk(k), vv(v);
  FloatOut out(q.dtype(), {N, H, dv});
  parallelFor(N * H, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, Lc * d)),
              [&](int64_t begin, int64_t end) {
                std::vector<const float *> keys(static_cast<size_t>(Lc)),
                    vals(static_cast<size_t>(Lc));
                std::vector<float> scratch(static_cast<size_t>(Lc)),
                    o(static_cast<size_t>(dv));
                for (int64_t item = begin; item < end; ++item) {
                  int64_t n = item / H, h = item % H;
                  int64_t b = coords.row(n)[0];
                  for (int64_t j = 0; j < Lc; ++j) {
                    keys[size_t(j)] = vk.data() + ((b * Lc + j) * H + h) * d;
                    vals[size_t(j)] = vv.data() + ((b * Lc + j) * H + h) * dv;
                  }
                  attendOne(vq.data() + item * d, d, dv, scale, Lc, keys.data(),
                            vals.data(), o.data(), scratch.data());
                  for (int64_t c = 0; c < dv; ++c)
                    out.set(item * dv + c, o[size_t(c)]);
                }
              });
  return out.take();
}

//===----------------------------------------------------------------------===//
// FP8 (E4M3) self-attention
//===----------------------------------------------------------------------===//

namespace {

constexpr int64_t kFp8HeadDim = 64;

/// 448 / (8 · max_e |γ_e|) (1 when that max is 0): the E4M3 scale of a
/// head-normalized row (|u'_e| <= 8 |γ_e|), as the GPU's fp8_head_scale.
float fp8HeadScale(const float *gamma) {
  float m = 0.0f;
  for (int64_t e = 0; e < kFp8HeadDim; ++e)
    m = std::max(m, std::fabs(gamma[e]));
  return m > 0.0f ? 448.0f / (8.0f * m) : 1.0f;
}

/// The math of attentionFp8 (Kernels.h) on `numTokens` rows of [rows, H, 64]
/// q, k, v (any shape with that layout) with the sequences given as in
/// Segments: sequence s is rows[off[s] .. off[s+1]), in that order.
Result<HostTensor> attendE4M3(const char *op, const HostTensor &q,
                              const HostTensor &k, const HostTensor &v,
                              const HostTensor &qGamma,
                              const HostTensor &kGamma, const int32_t *rows,
                              const int32_t *off, int64_t numSeqs,
                              int64_t numTokens, int64_t H, float scale,
                              std::span<const float> vAmax) {
  constexpr int64_t D = kFp8HeadDim;
  // q', k': the head RMS norm, rounded to the tensors' dtype.
  auto qn = headRmsNorm(q, qGamma);
  if (!qn)
    return opError(op, "q_gamma: " + qn.message());
  auto kn = headRmsNorm(k, kGamma);
  if (!kn)
    return opError(op, "k_gamma: " + kn.message());
  FloatView vq(*qn), vk(*kn), vv(v), gq(qGamma), gk(kGamma);

  // Per-head scales; v_amax over every token of the op, or the static one.
  std::vector<float> dynamicAmax;
  if (vAmax.empty()) {
    TRELLIS_ASSIGN_OR_RETURN(dynamicAmax, fp8HeadAmax(v));
    vAmax = dynamicAmax;
  } else if (int64_t(vAmax.size()) != H) {
    return opError(op, "v_amax has " + std::to_string(vAmax.size()) +
                           " values for " + std::to_string(H) + " heads");
  }
  std::vector<float> sq(static_cast<size_t>(H)), sk(sq), c(sq);
  std::vector<E4M3Scale> sv(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h) {
    sq[size_t(h)] = fp8HeadScale(gq.data() + h * D);
    sk[size_t(h)] = fp8HeadScale(gk.data() + h * D);
    c[size_t(h)] =
        scale * 1.4426950408889634f / (sq[size_t(h)] * sk[size_t(h)]);
    sv[size_t(h)] = e4m3ScaleFor(vAmax[size_t(h)]);
  }

  // The E4M3 operands, kept as their (exact) fp32 values.
  const int64_t n = numTokens * H * D;
  std::vector<float> q8(static_cast<size_t>(n)), k8(q8), v8(q8);
  parallelFor(numTokens * H, 64, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t h = item % H;
      for (int64_t e = item * D; e < (item + 1) * D; ++e) {
        q8[size_t(e)] = fromE4M3(toE4M3(vq[e] * sq[size_t(h)]));
        k8[size_t(e)] = fromE4M3(toE4M3(vk[e] * sk[size_t(h)]));
        v8[size_t(e)] = fromE4M3(toE4M3(vv[e] * sv[size_t(h)].quantize));
      }
    }
  });

  std::vector<int64_t> seqOf(static_cast<size_t>(numTokens));
  int64_t maxLen = 0;
  for (int64_t s = 0; s < numSeqs; ++s) {
    maxLen = std::max<int64_t>(maxLen, off[s + 1] - off[s]);
    for (int64_t p = off[s]; p < off[s + 1]; ++p)
      seqOf[size_t(p)] = s;
  }
  FloatOut out(q.dtype(), q.shape());
  // One (query row, head) per item, its keys in sequence order.
  parallelFor(
      numTokens * H,
      std::max<int64_t>(1, 4096 / std::max<int64_t>(1, maxLen * D)),
      [&](int64_t begin, int64_t end) {
        std::vector<float> S, P, exactO(static_cast<size_t>(D));
        std::vector<const float *> keys, vals;
        std::vector<double> o(static_cast<size_t>(D));
        for (int64_t item = begin; item < end; ++item) {
          const int64_t p = item / H, h = item % H;
          const int64_t s = seqOf[size_t(p)], first = off[s];
          const int64_t len = off[s + 1] - first;
          const int64_t row = rows[p];
          const float *qi = q8.data() + (row * H + h) * D;
          const float *gkh = gk.data() + h * D;
          const float ch = c[size_t(h)];
          // Logits: exact sums, rounded once.
          S.resize(size_t(len));
          P.resize(size_t(len));
          for (int64_t j = 0; j < len; ++j) {
            const float *kj =
                k8.data() + (int64_t(rows[first + j]) * H + h) * D;
            double acc = 0.0;
            for (int64_t e = 0; e < D; ++e)
              acc += double(qi[e]) * double(kj[e]);
            S[size_t(j)] = float(acc);
          }
          // The fixed reference: the first 64 keys' largest logit, capped by
          // the Cauchy-Schwarz bound less 8.
          double qq = 0.0;
          for (int64_t e = 0; e < D; ++e) {
            const float a = qi[e] * gkh[e];
            qq += double(a) * double(a);
          }
          const float bound =
              std::sqrt(float(qq) * float(D)) * sk[size_t(h)] * ch * 1.07f;
          float m = -INFINITY;
          for (int64_t j = 0; j < std::min<int64_t>(64, len); ++j)
            m = std::max(m, S[size_t(j)]);
          const float ref = std::min(m * ch, bound - 8.0f);
          // P in E4M3; l and O summed exactly, rounded once.
          double l = 0.0;
          bool above = false;
          std::fill(o.begin(), o.end(), 0.0);
          for (int64_t j = 0; j < len; ++j) {
            const float x = std::fma(S[size_t(j)], ch, -ref);
            const float pj = fromE4M3(toE4M3(float(std::exp2(double(x)))));
            above = above || pj > 256.0f;
            l += double(pj);
            const float *vj =
                v8.data() + (int64_t(rows[first + j]) * H + h) * D;
            for (int64_t e = 0; e < D; ++e)
              o[size_t(e)] += double(pj) * double(vj[e]);
          }
          if (above) {
            // A weight above 2^8 (a later key more than 8 above the
            // reference): the GPU recomputes the row's CTA with the fp16
            // online kernel; here the row gets the plain attention of q', k'.
            keys.resize(size_t(len));
            vals.resize(size_t(len));
            for (int64_t j = 0; j < len; ++j) {
              const int64_t t = int64_t(rows[first + j]) * H + h;
              keys[size_t(j)] = vk.data() + t * D;
              vals[size_t(j)] = vv.data() + t * D;
            }
            attendOne(vq.data() + (row * H + h) * D, D, D, scale, len,
                      keys.data(), vals.data(), exactO.data(), P.data());
            for (int64_t e = 0; e < D; ++e)
              out.set((row * H + h) * D + e, exactO[size_t(e)]);
            continue;
          }
          const float lf = float(l);
          const float inv = lf > 0.0f ? sv[size_t(h)].dequantize / lf : 0.0f;
          for (int64_t e = 0; e < D; ++e)
            out.set((row * H + h) * D + e, float(o[size_t(e)]) * inv);
        }
      });
  return out.take();
}

} // namespace

Result<std::vector<float>> fp8HeadAmax(const HostTensor &v) {
  if (v.rank() < 2)
    return Error{"fp8HeadAmax: v must be [..., H, d], got " + describe(v)};
  const int64_t H = v.dim(v.rank() - 2), D = v.dim(v.rank() - 1);
  const int64_t tokens = H * D > 0 ? v.numel() / (H * D) : 0;
  FloatView vv(v);
  std::vector<float> amax(static_cast<size_t>(H), 0.0f);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < H; ++h)
      amax[size_t(h)] =
          std::max(amax[size_t(h)], e4m3Amax(vv.data() + (t * H + h) * D, D));
  return amax;
}

Result<HostTensor> attentionFp8(const HostTensor &q, const HostTensor &k,
                                const HostTensor &v, const HostTensor &qGamma,
                                const HostTensor &kGamma, float scale,
                                std::span<const float> vAmax) {
  const char *op = "attention";
  TRELLIS_RETURN_IF_ERROR(expectFloatQkv(op, q, k, v));
  if (q.rank() != 4 || q.dim(3) != kFp8HeadDim || k.shape() != q.shape() ||
      v.shape() != q.shape())
    return opError(op, "precision = \"fp8_e4m3\" needs q, k, v of one shape "
                       "[B, L, H, 64] (self-attention, head dim 64), got " +
                           describe(q) + ", " + describe(k) + ", " +
                           describe(v));
  const int64_t B = q.dim(0), L = q.dim(1), H = q.dim(2);
  if (B * L > std::numeric_limits<int32_t>::max())
    return opError(op, "too many tokens for precision = \"fp8_e4m3\"");
  std::vector<int32_t> rows(static_cast<size_t>(B * L)),
      off(static_cast<size_t>(B + 1));
  for (int64_t t = 0; t < B * L; ++t)
    rows[size_t(t)] = int32_t(t);
  for (int64_t b = 0; b <= B; ++b)
    off[size_t(b)] = int32_t(b * L);
  return attendE4M3(op, q, k, v, qGamma, kGamma, rows.data(), off.data(), B,
                    B * L, H, scale, vAmax);
}

Result<HostTensor> sparseAttentionFp8(const HostTensor &q, const HostTensor &k,
                                      const HostTensor &v,
                                      const Segments &segments,
                                      const HostTensor &qGamma,
                                      const HostTensor &kGamma, float scale,
                                      std::span<const float> vAmax) {
  const char *op = "sparse.attention";
  TRELLIS_RETURN_IF_ERROR(checkRowTensors(op, q, k, v));
  if (q.dim(2) != kFp8HeadDim || v.dim(2) != kFp8HeadDim)
    return opError(op, "precision = \"fp8_e4m3\" needs head dim 64, got " +
                           describe(q) + ", " + describe(v));
  const int64_t N = q.dim(0), H = q.dim(1);
  TRELLIS_RETURN_IF_ERROR(checkSegments(op, segments, N));
  return attendE4M3(op, q, k, v, qGamma, kGamma, segments.rows.data<int32_t>(),
                    segments.offsets.data<int32_t>(), segments.numSegments(), N,
                    H, scale, vAmax);
}

} // namespace trellis::ref
