//===- Conv.cpp - dense conv3d, pixel_shuffle_3d, occupancy ---------------===//
#include "runtime/reference/Common.h"

#include <cstring>

namespace trellis::ref {
using namespace detail;

Result<HostTensor> conv3d(const HostTensor &x, const HostTensor &weight,
                          const HostTensor *bias, int64_t padding) {
  const char *op = "conv3d";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "x", x));
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "the weight", weight));
  if (padding < 0)
    return opError(op, "padding must be >= 0");
  if (x.rank() != 5 || weight.rank() != 5 || weight.dim(1) != x.dim(1))
    return opError(op, "needs x [B, I, D, H, W] and weight [O, I, kd, kh, kw], "
                       "got " +
                           describe(x) + " and " + describe(weight));
  const int64_t B = x.dim(0), I = x.dim(1);
  const int64_t O = weight.dim(0);
  const int64_t in[3] = {x.dim(2), x.dim(3), x.dim(4)};
  const int64_t k[3] = {weight.dim(2), weight.dim(3), weight.dim(4)};
  int64_t pad[3], outDim[3];
  for (int a = 0; a < 3; ++a) {
    pad[a] = padding;
    outDim[a] = in[a] + 2 * pad[a] - k[a] + 1;
    if (outDim[a] < 0)
      return opError(op, "the kernel is larger than the padded input");
  }
  if (bias) {
    TRELLIS_RETURN_IF_ERROR(expectFloat(op, "the bias", *bias));
    if (Status s = expectShape(op, "the bias", *bias, {O}); !s)
      return Error{s.message()};
  }
  FloatView vx(x), vw(weight);
  std::vector<float> b(size_t(O), 0.0f);
  if (bias) {
    FloatView vb(*bias);
    b.assign(vb.data(), vb.data() + O);
  }
  const int64_t plane = outDim[0] * outDim[1] * outDim[2];
  const int64_t inPlane = in[0] * in[1] * in[2];
  FloatOut out(x.dtype(), {B, O, outDim[0], outDim[1], outDim[2]});
  // One (b, o) output volume per item. Each output element accumulates in a
  // fixed order (input channel, then kernel offsets kd, kh, kw), then + bias.
  // Cross-correlation: kernel index a reads input position out + a − pad
  // (§5.1); outside the input counts as zero.
  parallelFor(B * O, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> acc(static_cast<size_t>(plane));
    for (int64_t item = begin; item < end; ++item) {
      int64_t bi = item / O, o = item % O;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t i = 0; i < I; ++i) {
        const float *src = vx.data() + (bi * I + i) * inPlane;
        for (int64_t a = 0; a < k[0]; ++a)
          for (int64_t bb = 0; bb < k[1]; ++bb)
            for (int64_t c = 0; c < k[2]; ++c) {
              float w = vw[(((o * I + i) * k[0] + a) * k[1] + bb) * k[2] + c];
              for (int64_t z = 0; z < outDim[0]; ++z) {
                int64_t iz = z + a - pad[0];
                if (iz < 0 || iz >= in[0])
                  continue;
                for (int64_t y = 0; y < outDim[1]; ++y) {
                  int64_t iy = y + bb - pad[1];
                  if (iy < 0 || iy >= in[1])
                    continue;
                  // Input column ix = xx + c − pad, inside [0, W) for xx
                  // in [x0, x1).
                  const float *srow = src + (iz * in[1] + iy) * in[2];
                  float *arow = acc.data() + (z * outDim[1] + y) * outDim[2];
                  const int64_t shift = c - pad[2];
                  const int64_t x0 = std::max<int64_t>(0, -shift);
                  const int64_t x1 =
                      std::min<int64_t>(outDim[2], in[2] - shift);
                  for (int64_t xx = x0; xx < x1; ++xx)
                    arow[xx] += w * srow[xx + shift];
                }
              }
            }
      }
      for (int64_t p = 0; p < plane; ++p)
        out.set(item * plane + p, acc[size_t(p)] + b[size_t(o)]);
    }
  });
  return out.take();
}

Result<HostTensor> pixelShuffle3d(const HostTensor &x, int64_t factor) {
  const char *op = "pixel_shuffle_3d";
  const int64_t s = factor, s3 = factor * factor * factor;
  if (x.rank() != 5 || s < 1 || x.dim(1) % s3 != 0)
    return opError(op, "needs x [B, C·s³, D, H, W] with s = " +
                           std::to_string(factor) + ", got " + describe(x));
  const int64_t B = x.dim(0), C = x.dim(1) / s3;
  const int64_t D = x.dim(2), H = x.dim(3), W = x.dim(4);
  HostTensor out(x.dtype(), {B, C, D * s, H * s, W * s});
  const size_t es = dtypeSize(x.dtype());
  const auto *src = static_cast<const uint8_t *>(x.raw());
  auto *dst = static_cast<uint8_t *>(out.mutableRaw());
  // §5.1: out[b, c, s·x+s1, s·y+s2, s·z+s3] = in[b, c·s³ + s1·s² + s2·s + s3,
  // x, y, z]; walked over the output, one element at a time.
  const int64_t total = out.numel();
  parallelFor(total, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t r = i;
      int64_t oz = r % (W * s);
      r /= W * s;
      int64_t oy = r % (H * s);
      r /= H * s;
      int64_t ox = r % (D * s);
      r /= D * s;
      int64_t c = r % C, b = r / C;
      int64_t ic = c * s3 + (ox % s) * s * s + (oy % s) * s + (oz % s);
      int64_t j = (((b * C * s3 + ic) * D + ox / s) * H + oy / s) * W + oz / s;
      std::memcpy(dst + size_t(i) * es, src + size_t(j) * es, es);
    }
  });
  return out;
}

Result<HostTensor> occupancy(const HostTensor &logits) {
  const char *op = "occupancy";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "logits", logits));
  if (logits.rank() != 5 || logits.dim(1) != 1)
    return opError(op, "needs logits [B, 1, D, H, W], got " + describe(logits));
  const int64_t D = logits.dim(2), H = logits.dim(3), W = logits.dim(4);
  FloatView v(logits);
  // §5.3: argwhere(logits > 0), strictly (0, -0 and NaN are empty), in
  // lexicographic (b, x, y, z) order; the channel column is dropped.
  std::vector<int32_t> rows;
  for (int64_t i = 0; i < logits.numel(); ++i) {
    if (!(v[i] > 0.0f))
      continue;
    int64_t z = i % W, y = (i / W) % H, xx = (i / (W * H)) % D,
            b = i / (W * H * D);
    rows.insert(rows.end(), {int32_t(b), int32_t(xx), int32_t(y), int32_t(z)});
  }
  HostTensor out(DType::I32, {int64_t(rows.size() / 4), 4});
  if (!rows.empty())
    std::memcpy(out.mutableRaw(), rows.data(), rows.size() * sizeof(int32_t));
  return out;
}

} // namespace trellis::ref
