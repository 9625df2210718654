//===- Norm.cpp - layer_norm, head_rms_norm, softmax, reduce --------------===//
#include "runtime/reference/Common.h"

#include <cmath>

namespace trellis::ref {
using namespace detail;

namespace {

/// x viewed as [outer, n, inner] around one axis.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisSplit splitAt(const Shape &shape, int axis) {
  AxisSplit s;
  for (int d = 0; d < int(shape.size()); ++d) {
    if (d < axis)
      s.outer *= shape[d];
    else if (d == axis)
      s.n = shape[d];
    else
      s.inner *= shape[d];
  }
  return s;
}

} // namespace

Result<HostTensor> layerNorm(const HostTensor &x, int axis, float eps,
                             const HostTensor *gamma, const HostTensor *beta) {
  const char *op = "layer_norm";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "x", x));
  int ax = normalizeAxis(axis, x.rank());
  if (ax < 0)
    return opError(op, "axis " + std::to_string(axis) +
                           " is out of range for " + describe(x));
  AxisSplit sp = splitAt(x.shape(), ax);
  for (const HostTensor *p : {gamma, beta}) {
    if (!p)
      continue;
    const char *what = p == gamma ? "gamma" : "beta";
    TRELLIS_RETURN_IF_ERROR(expectFloat(op, what, *p));
    if (Status s = expectShape(op, what, *p, {sp.n}); !s)
      return Error{s.message()};
  }
  FloatView vx(x);
  std::vector<float> g, b;
  if (gamma) {
    FloatView v(*gamma);
    g.assign(v.data(), v.data() + sp.n);
  }
  if (beta) {
    FloatView v(*beta);
    b.assign(v.data(), v.data() + sp.n);
  }
  FloatOut out(x.dtype(), x.shape());
  const int64_t items = sp.outer * sp.inner;
  parallelFor(items, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, sp.n)),
              [&](int64_t begin, int64_t end) {
                std::vector<float> u(static_cast<size_t>(sp.n)),
                    dev(static_cast<size_t>(sp.n));
                for (int64_t item = begin; item < end; ++item) {
                  int64_t o = item / sp.inner, in = item % sp.inner;
                  int64_t base = o * sp.n * sp.inner + in;
                  for (int64_t j = 0; j < sp.n; ++j)
                    u[size_t(j)] = vx[base + j * sp.inner];
                  // Biased variance, two passes, f32 (LayerNorm32 computes in
                  // fp32 whatever the storage dtype, §3.6).
                  float mean = pairwiseSum(u.data(), sp.n) / float(sp.n);
                  for (int64_t j = 0; j < sp.n; ++j) {
                    float d = u[size_t(j)] - mean;
                    dev[size_t(j)] = d * d;
                  }
                  float var = pairwiseSum(dev.data(), sp.n) / float(sp.n);
                  float rstd = 1.0f / std::sqrt(var + eps);
                  for (int64_t j = 0; j < sp.n; ++j) {
                    float y = (u[size_t(j)] - mean) * rstd;
                    if (gamma)
                      y = y * g[size_t(j)];
                    if (beta)
                      y = y + b[size_t(j)];
                    out.set(base + j * sp.inner, y);
                  }
                }
              });
  return out.take();
}

Result<HostTensor> layerNormModulate(const HostTensor &x,
                                     const HostTensor &shift,
                                     const HostTensor &scale, float eps) {
  // The same kernels as the unfused pair, with the normalized rows kept in
  // f32 instead of rounded to x's dtype in between.
  Result<HostTensor> norm = layerNorm(x.toFloat32(), -1, eps);
  if (!norm)
    return norm.takeError();
  Result<HostTensor> mod =
      modulate(*norm, shift.toFloat32(), scale.toFloat32());
  if (!mod)
    return mod.takeError();
  return cast(*mod, x.dtype());
}

Result<HostTensor> headRmsNorm(const HostTensor &x, const HostTensor &gamma) {
  const char *op = "head_rms_norm";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "x", x));
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "gamma", gamma));
  if (x.rank() < 2)
    return opError(op, "x must be [..., H, d], got " + describe(x));
  const int64_t H = x.dim(-2), d = x.dim(-1);
  if (Status s = expectShape(op, "gamma", gamma, {H, d}); !s)
    return Error{s.message()};
  FloatView vx(x), vg(gamma);
  FloatOut out(x.dtype(), x.shape());
  // §3.6 [quirk]: F.normalize (u / max(‖u‖₂, 1e-12)) · γ[h] · √d; not an RMS
  // with a mean-square eps. Evaluated in that order, in f32.
  const float rootD = float(std::sqrt(double(d)));
  const int64_t vectors = d ? x.numel() / d : 0;
  parallelFor(vectors, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, d)),
              [&](int64_t begin, int64_t end) {
                std::vector<float> sq(static_cast<size_t>(d));
                for (int64_t vi = begin; vi < end; ++vi) {
                  const float *u = vx.data() + vi * d;
                  const float *g = vg.data() + (vi % H) * d;
                  for (int64_t j = 0; j < d; ++j)
                    sq[size_t(j)] = u[j] * u[j];
                  float norm = std::sqrt(pairwiseSum(sq.data(), d));
                  float denom = std::max(norm, 1e-12f);
                  for (int64_t j = 0; j < d; ++j)
                    out.set(vi * d + j, u[j] / denom * g[j] * rootD);
                }
              });
  return out.take();
}

Result<HostTensor> softmax(const HostTensor &x, int axis) {
  const char *op = "softmax";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "x", x));
  int ax = normalizeAxis(axis, x.rank());
  if (ax < 0)
    return opError(op, "axis " + std::to_string(axis) +
                           " is out of range for " + describe(x));
  AxisSplit sp = splitAt(x.shape(), ax);
  FloatView vx(x);
  FloatOut out(x.dtype(), x.shape());
  parallelFor(sp.outer * sp.inner,
              std::max<int64_t>(1, 4096 / std::max<int64_t>(1, sp.n)),
              [&](int64_t begin, int64_t end) {
                std::vector<float> e(static_cast<size_t>(sp.n));
                for (int64_t item = begin; item < end; ++item) {
                  int64_t o = item / sp.inner, in = item % sp.inner;
                  int64_t base = o * sp.n * sp.inner + in;
                  float m = -INFINITY;
                  for (int64_t j = 0; j < sp.n; ++j)
                    m = std::max(m, vx[base + j * sp.inner]);
                  for (int64_t j = 0; j < sp.n; ++j)
                    e[size_t(j)] = std::exp(vx[base + j * sp.inner] - m);
                  float sum = pairwiseSum(e.data(), sp.n);
                  for (int64_t j = 0; j < sp.n; ++j)
                    out.set(base + j * sp.inner, e[size_t(j)] / sum);
                }
              });
  return out.take();
}

Result<HostTensor> reduce(const HostTensor &x, const std::string &kind,
                          int axis, bool keepdim) {
  const char *op = "reduce";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "x", x));
  if (kind != "sum" && kind != "mean" && kind != "max")
    return opError(op, "kind must be sum, mean or max, found \"" + kind + "\"");
  int ax = normalizeAxis(axis, x.rank());
  if (ax < 0)
    return opError(op, "axis " + std::to_string(axis) +
                           " is out of range for " + describe(x));
  AxisSplit sp = splitAt(x.shape(), ax);
  Shape shape;
  for (int d = 0; d < x.rank(); ++d)
    if (d != ax)
      shape.push_back(x.dim(d));
    else if (keepdim)
      shape.push_back(1);
  FloatView vx(x);
  FloatOut out(x.dtype(), shape);
  const bool isMax = kind == "max";
  parallelFor(sp.outer * sp.inner,
              std::max<int64_t>(1, 4096 / std::max<int64_t>(1, sp.n)),
              [&](int64_t begin, int64_t end) {
                std::vector<float> v(static_cast<size_t>(sp.n));
                for (int64_t item = begin; item < end; ++item) {
                  int64_t o = item / sp.inner, in = item % sp.inner;
                  int64_t base = o * sp.n * sp.inner + in;
                  for (int64_t j = 0; j < sp.n; ++j)
                    v[size_t(j)] = vx[base + j * sp.inner];
                  float r;
                  if (isMax) {
                    r = -INFINITY;
                    for (float e : v) // NaN propagates (as torch.amax)
                      r = (std::isnan(e) || e > r) ? e : r;
                    for (float e : v)
                      if (std::isnan(e))
                        r = e;
                  } else {
                    r = pairwiseSum(v.data(), sp.n);
                    if (kind == "mean")
                      r /= float(sp.n);
                  }
                  out.set(item, r);
                }
              });
  return out.take();
}

} // namespace trellis::ref
