//===- Common.h - Helpers shared by the reference kernels (internal) ------===//
#ifndef TRELLIS_RUNTIME_REFERENCE_COMMON_H
#define TRELLIS_RUNTIME_REFERENCE_COMMON_H

#include "trellis/Reference/Kernels.h"
#include "trellis/Reference/Parallel.h"
#include "trellis/Support/Half.h"

#include <string>
#include <vector>

namespace trellis::ref::detail {

inline bool isFloat(DType t) { return t == DType::F16 || t == DType::F32; }
inline bool isInt(DType t) { return t == DType::I32 || t == DType::I64; }

/// "trellis.<op>: <message>".
inline Error opError(const char *op, const std::string &message) {
  return Error{std::string("trellis.") + op + ": " + message};
}

/// "f16 [2, 3]" for messages.
std::string describe(const HostTensor &t);

/// Checks that `t` is an f16 or f32 tensor; `what` names it in the message.
Status expectFloat(const char *op, const char *what, const HostTensor &t);
/// Checks that `t` has the given shape.
Status expectShape(const char *op, const char *what, const HostTensor &t,
                   const Shape &shape);

/// The values of a float or integer tensor as f32: a pointer into the
/// tensor for f32, else a converted copy (f16 widened exactly).
class FloatView {
public:
  explicit FloatView(const HostTensor &t);
  const float *data() const { return ptr_; }
  float operator[](int64_t i) const { return ptr_[i]; }

private:
  std::vector<float> owned_;
  const float *ptr_ = nullptr;
};

/// An output tensor of f16 or f32 written from f32 values; set() rounds to
/// the tensor's dtype (round to nearest even for f16). Threads may write
/// disjoint elements concurrently.
class FloatOut {
public:
  FloatOut(DType dtype, Shape shape);
  void set(int64_t i, float v) {
    if (f32_)
      f32_[i] = v;
    else
      f16_[i] = floatToHalf(v);
  }
  HostTensor &tensor() { return t_; }
  HostTensor take() { return std::move(t_); }

private:
  HostTensor t_;
  float *f32_ = nullptr;
  uint16_t *f16_ = nullptr;
};

/// Normalizes a possibly negative axis; -1 if out of range.
inline int normalizeAxis(int axis, int rank) {
  if (axis < 0)
    axis += rank;
  return (axis < 0 || axis >= rank) ? -1 : axis;
}

/// Cascade (pairwise) sum in f32 in a fixed order: blocks of 8 summed
/// left to right, blocks combined as a balanced tree. Error O(log n · eps).
float pairwiseSum(const float *a, int64_t n);

/// Dot product in f32 in a fixed order: 8 interleaved partial sums (lane j
/// takes the terms k ≡ j mod 8, ascending), combined as ((0+1)+(2+3)) +
/// ((4+5)+(6+7)). Deterministic, and it lets the compiler vectorize.
inline float dotF32(const float *a, const float *b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j)
      acc[j] += a[k + j] * b[k + j];
  for (int j = 0; j < 8 && k < n; ++j, ++k) // the < 8 tail terms
    acc[j] += a[k] * b[k];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// Softmax-weighted sum of one attention query: scores s_j = scale·(q·k_j)
/// for the `nk` keys at kRow(j) (each `d` wide), then
/// out = Σ_j e^{s_j − max} v_j / Σ_j e^{s_j − max}, all f32, j ascending.
/// `keys` and `vals` index the key/value rows; `scratch` has room for nk.
void attendOne(const float *q, int64_t d, int64_t dv, float scale, int64_t nk,
               const float *const *keys, const float *const *vals, float *out,
               float *scratch);

} // namespace trellis::ref::detail

#endif // TRELLIS_RUNTIME_REFERENCE_COMMON_H
