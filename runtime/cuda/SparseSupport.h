//===- SparseSupport.h - Helpers of the sparse stages -----------*- C++ -*-===//
//
// Private to runtime/cuda: what the binding and the command builders of a
// sparse stage (SparseBinding.cpp, SparseCommands.cpp, SparseConv.cpp,
// SparseAttention.cpp) share: row sizes, segment lengths, the offsets of a
// coordinate set, and how a sparse conv runs (ConvPlan, SparseConv.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_CUDA_SPARSESUPPORT_H
#define TRELLIS_RUNTIME_CUDA_SPARSESUPPORT_H

#include "runtime/cuda/PreparedFunction.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trellis {

using SegmentsPtr = std::shared_ptr<const ref::Segments>;

namespace gpuexec {

/// The tiles of the implicit-GEMM conv (runtime/kernels/sparse_conv_sm90.cuh):
/// rows BM, output channels BN, input channels per chunk KC, ring stages.
struct ConvTiles {
  int bm = 0, bn = 0, kc = 0, stages = 0;
  explicit operator bool() const { return bn > 0; }
  std::string kernel() const {
    return "trellis_sparse_conv_implicit_m" + std::to_string(bm) + "_n" +
           std::to_string(bn) + "_k" + std::to_string(kc) + "_s" +
           std::to_string(stages) + "_f16";
  }
  /// Dynamic shared memory: 1 KiB of alignment slack, the stages of (BM + BN)
  /// rows of KC halves, then the CTA's BM · kvol neighbour-map rows (the
  /// kernel's layout).
  unsigned smem(int64_t kvol) const {
    return unsigned(1024 + stages * (bm + bn) * kc * 2 + bm * kvol * 4);
  }
};

/// How a 3×3×3 sparse conv runs on the GPU:
///   * taps first: the k³ products x·W_oᵀ of every row of x first (f32, 27
///     strided-batched GEMMs), then each output row sums its active
///     neighbours' products. Taken when x has fewer rows than the output (a
///     parent neighbour map: the products are formed on the coarse rows,
///     trellis-sink-upsample), and for narrow outputs (Cout < Cin / 2) that
///     the implicit kernel does not take: f32 [k³, N, Cout] is then smaller
///     than the gathered rows [N, k³·Cin] it replaces;
///   * implicit GEMM (convImplicitTiles);
///   * otherwise the neighbour rows are gathered (im2col order, in chunks)
///     and multiplied by cuBLASLt.
/// The gather and the tap sum are generated kernels (the codegen's
/// emitSparseConvKernels: the op's trellis.launch and trellis.tap_sum).
struct ConvPlan {
  enum class Path { Gather, TapsFirst, Implicit } path = Path::Gather;
  ConvTiles tiles;
};
/// The path and tiles of a sparse conv (SparseConv.cpp): `x` its features,
/// `w` its weights, `outRows` its output rows, `sm90a` whether the runtime
/// module is the sm_90a one.
ConvPlan convPlan(const Instr &conv, const ValueType &x, const ValueType &w,
                  int64_t outRows, bool sm90a);

inline int64_t rowElems(const ValueType &t) {
  int64_t n = 1;
  for (size_t d = 1; d < t.shape.size(); ++d)
    n *= t.shape[d];
  return n;
}

inline const char *typeSuffix(DType t) {
  return t == DType::F16 ? "f16" : "f32";
}

inline bool isIdentity(const ref::Segments &s) {
  const int32_t *rows = s.rows.data<int32_t>();
  for (int64_t i = 0; i < s.rows.numel(); ++i)
    if (rows[i] != i)
      return false;
  return true;
}

inline int32_t longestSegment(const HostTensor &offsets) {
  const int32_t *o = offsets.data<int32_t>();
  int32_t longest = 0;
  for (int64_t i = 0; i + 1 < offsets.numel(); ++i)
    longest = std::max(longest, o[i + 1] - o[i]);
  return longest;
}

/// Every segment's length.
inline std::vector<int64_t> segmentLengths(const HostTensor &offsets) {
  const int32_t *o = offsets.data<int32_t>();
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i + 1 < offsets.numel(); ++i)
    lengths.push_back(o[i + 1] - o[i]);
  return lengths;
}

/// The longest segment of a window partition: a full window, or all rows
/// (the attention grid covers it; shorter and empty windows end early).
inline int64_t longestWindow(const Prepared::WindowPartition &w) {
  return std::min<int64_t>(int64_t(w.window) * w.window * w.window,
                           std::max<int64_t>(w.rows, 1));
}

inline HostTensor offsetsOf(const ref::CoordSet &c) {
  HostTensor t(DType::I32, {int64_t(c.offsets.size())});
  for (size_t i = 0; i < c.offsets.size(); ++i)
    t.mutableData<int32_t>()[i] = int32_t(c.offsets[i]);
  return t;
}

} // namespace gpuexec

} // namespace trellis

#endif // TRELLIS_RUNTIME_CUDA_SPARSESUPPORT_H
