//===- Common.cpp - Helpers shared by the reference kernels ---------------===//
#include "runtime/reference/Common.h"

#include <cmath>

namespace trellis::ref::detail {

std::string describe(const HostTensor &t) {
  return std::string(dtypeName(t.dtype())) + " " + shapeToString(t.shape());
}

Status expectFloat(const char *op, const char *what, const HostTensor &t) {
  if (!t.defined())
    return opError(op, std::string(what) + " is missing");
  if (!isFloat(t.dtype()))
    return opError(op, std::string(what) + " must be f16 or f32, got " +
                           describe(t));
  return Status::ok();
}

Status expectShape(const char *op, const char *what, const HostTensor &t,
                   const Shape &shape) {
  if (t.shape() != shape)
    return opError(op, std::string(what) + " must have shape " +
                           shapeToString(shape) + ", got " + describe(t));
  return Status::ok();
}

FloatView::FloatView(const HostTensor &t) {
  if (t.dtype() == DType::F32) {
    ptr_ = t.data<float>();
    return;
  }
  HostTensor f = t.toFloat32();
  owned_.assign(f.data<float>(), f.data<float>() + f.numel());
  ptr_ = owned_.data();
}

FloatOut::FloatOut(DType dtype, Shape shape) : t_(dtype, std::move(shape)) {
  if (dtype == DType::F32)
    f32_ = t_.mutableData<float>();
  else
    f16_ = t_.mutableData<uint16_t>();
}

float pairwiseSum(const float *a, int64_t n) {
  if (n <= 8) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i)
      s += a[i];
    return s;
  }
  // Split at a multiple of 8 so that the leaves are the same blocks of 8
  // whatever the caller's n.
  int64_t blocks = (n + 7) / 8;
  int64_t half = (blocks / 2) * 8;
  return pairwiseSum(a, half) + pairwiseSum(a + half, n - half);
}

void attendOne(const float *q, int64_t d, int64_t dv, float scale, int64_t nk,
               const float *const *keys, const float *const *vals, float *out,
               float *scratch) {
  for (int64_t c = 0; c < dv; ++c)
    out[c] = 0.0f;
  if (nk == 0)
    return;
  float maxScore = -INFINITY;
  for (int64_t j = 0; j < nk; ++j) {
    scratch[j] = dotF32(q, keys[j], d) * scale;
    maxScore = std::max(maxScore, scratch[j]);
  }
  float denom = 0.0f;
  for (int64_t j = 0; j < nk; ++j) {
    float p = std::exp(scratch[j] - maxScore);
    denom += p;
    for (int64_t c = 0; c < dv; ++c)
      out[c] += p * vals[j][c];
  }
  for (int64_t c = 0; c < dv; ++c)
    out[c] /= denom;
}

} // namespace trellis::ref::detail
