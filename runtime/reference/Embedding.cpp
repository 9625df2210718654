//===- Embedding.cpp - timestep embedding and absolute position embedding -===//
//
// Both embeddings are f32 (spec §3.6). The frequency tables are formed as
// TRELLIS forms them in f32; their exp/pow are evaluated in double and
// rounded once to f32 (the correctly rounded f32 value, independent of the
// libm), and so are the final sin/cos of the f32 arguments.
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/Common.h"

#include <cmath>

namespace trellis::ref {
using namespace detail;

Result<HostTensor> timestepEmbedding(const HostTensor &tau, int64_t dim,
                                     double maxPeriod) {
  const char *op = "timestep_embedding";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "tau", tau));
  if (tau.rank() != 1 || dim < 1)
    return opError(op, "needs tau [B] and dim >= 1, got tau " + describe(tau) +
                           ", dim " + std::to_string(dim));
  const int64_t B = tau.dim(0), half = dim / 2;
  // f_j = exp(−ln(P)·j / half): TRELLIS forms (f32(−ln P) · j) / half in f32.
  std::vector<float> freq(static_cast<size_t>(half));
  const float negLog = float(-std::log(maxPeriod));
  for (int64_t j = 0; j < half; ++j) {
    float a = (negLog * float(j)) / float(half);
    freq[size_t(j)] = float(std::exp(double(a)));
  }
  FloatView t(tau);
  HostTensor out(DType::F32, {B, dim}); // zero-filled: the odd-dim pad column
  float *o = out.mutableData<float>();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < half; ++j) {
      float arg = t[b] * freq[size_t(j)]; // the f32 product τ·f_j
      // §3.6 [quirk]: COSINE first, then sine (the APE is the other way).
      o[b * dim + j] = float(std::cos(double(arg)));
      o[b * dim + half + j] = float(std::sin(double(arg)));
    }
  }
  return out;
}

Result<HostTensor> ape(const HostTensor &pos, int64_t channels) {
  const char *op = "ape";
  if (!isInt(pos.dtype()) || pos.rank() != 2 || pos.dim(1) != 3)
    return opError(op, "needs integer positions [L, 3], got " + describe(pos));
  if (channels < 0)
    return opError(op, "channels must be >= 0");
  const int64_t L = pos.dim(0);
  // §3.6: F = ⌊C/3/2⌋ frequencies ω_j = 1 / 10000^(j/F), in f32:
  // (j / F) in f32, the power rounded to f32, then the f32 reciprocal.
  const int64_t F = channels / 3 / 2;
  std::vector<float> omega(static_cast<size_t>(F));
  for (int64_t j = 0; j < F; ++j) {
    float r = float(j) / float(F);
    float p = float(std::pow(10000.0, double(r)));
    omega[size_t(j)] = 1.0f / p;
  }
  HostTensor out(DType::F32, {L, channels}); // zero-filled: the end padding
  float *o = out.mutableData<float>();
  // Rows in parallel (each row alone: the same values for any split); the
  // GPU runtime evaluates this at every binding of a sparse stage.
  parallelFor(L, 64, [&](int64_t begin, int64_t end) {
    for (int64_t l = begin; l < end; ++l) {
      for (int axis = 0; axis < 3; ++axis) {
        int64_t c = pos.dtype() == DType::I32
                        ? pos.data<int32_t>()[l * 3 + axis]
                        : pos.data<int64_t>()[l * 3 + axis];
        float x = float(c);
        float *dst = o + l * channels + axis * 2 * F;
        for (int64_t j = 0; j < F; ++j) {
          float arg = x * omega[size_t(j)]; // the f32 outer product
          // §3.6 [quirk]: per axis SINE first, then cosine; padding stays
          // zero (C = 1024: F = 170, 1020 values + 4 zeros).
          dst[j] = float(std::sin(double(arg)));
          dst[F + j] = float(std::cos(double(arg)));
        }
      }
    }
  });
  return out;
}

} // namespace trellis::ref
