//===- Attention.cpp - dense, segmented and sparse cross attention --------===//
//
// softmax(scale·q·kᵀ)·v with f32 scores, f32 softmax and f32 accumulation
// (spec §3.6, §6.5, §7.1; flash-attn accumulates in f32 as well). Each query
// (row, head) is computed by one thread over its keys in ascending order.
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/Common.h"

namespace trellis::ref {
using namespace detail;

Result<HostTensor> attention(const HostTensor &q, const HostTensor &k,
                             const HostTensor &v, float scale) {
  const char *op = "attention";
  for (const HostTensor *t : {&q, &k, &v})
    TRELLIS_RETURN_IF_ERROR(expectFloat(op,
                                        t == &q   ? "q"
                                        : t == &k ? "k"
                                                  : "v",
                                        *t));
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
  for (const HostTensor *t : {&q, &k, &v})
    TRELLIS_RETURN_IF_ERROR(expectFloat(op,
                                        t == &q   ? "q"
                                        : t == &k ? "k"
                                                  : "v",
                                        *t));
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
  for (const HostTensor *t : {&q, &k, &v})
    TRELLIS_RETURN_IF_ERROR(expectFloat(op,
                                        t == &q   ? "q"
                                        : t == &k ? "k"
                                                  : "v",
                                        *t));
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

} // namespace trellis::ref
