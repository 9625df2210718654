//===- TrellisOpsUtils.h - Shared verifier and inference --------*- C++ -*-===//
//
// Private to the dialect's .cpp files: building inferred (bounded) tensor
// types and emitting the uniform "expected ..., found ..." diagnostics.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_DIALECT_TRELLISOPSUTILS_H
#define TRELLIS_DIALECT_TRELLISOPSUTILS_H

#include "dialect/TrellisOps.h"

#include "mlir/IR/Diagnostics.h"

#include <optional>
#include <string>

namespace mlir::trellis::detail {

/// "?" for a dynamic size, else the number.
std::string dimToString(int64_t size);

/// `value` in printf's %g form ("0.5", "1e-05").
std::string formatDouble(double value);

/// The shape of `type` as "[2, ?, 64]".
std::string shapeToString(RankedTensorType type);

/// Accumulates the shape and dynamic-dimension bounds of an inferred tensor
/// type, dimension by dimension.
class ShapeBuilder {
public:
  /// Appends dimension `dim` of `type` (with its bound if dynamic).
  ShapeBuilder &dim(RankedTensorType type, int64_t dim);
  /// Appends dimensions [begin, end) of `type`.
  ShapeBuilder &dims(RankedTensorType type, int64_t begin, int64_t end);
  /// Appends dimension `dim` of `type` transformed to size·mul + add; a
  /// dynamic dimension stays dynamic with its bound transformed alike.
  ShapeBuilder &scaled(RankedTensorType type, int64_t dim, int64_t mul,
                       int64_t add = 0);
  /// Appends a static dimension.
  ShapeBuilder &size(int64_t size);
  /// Appends a dynamic dimension of upper bound `bound`.
  ShapeBuilder &dynamic(int64_t bound);

  /// The tensor type; dynamic dimensions carry a #trellis.bounds encoding
  /// (none if some bound was unknown: the BoundedShapes trait reports it).
  RankedTensorType get(Type elementType) const;

private:
  SmallVector<int64_t> shape, bounds;
  bool unbounded = false;
};

/// `axis` in [-rank, rank) normalized to [0, rank); nullopt if out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// Two static sizes agree when equal; a dynamic size agrees only with a
/// dynamic size (the runtime checks the actual sizes).
inline bool dimsAgree(int64_t a, int64_t b) { return a == b; }

/// NumPy broadcasting of the leading `lhsRank` dims of `lhs` with the leading
/// `rhsRank` dims of `rhs`, appended to `out`. On failure returns the index
/// (in the broadcast shape) of the first incompatible dimension.
std::optional<int64_t> broadcastInto(RankedTensorType lhs, int64_t lhsRank,
                                     RankedTensorType rhs, int64_t rhsRank,
                                     ShapeBuilder &out);

/// `value` is a per-row vector of the adaLN ops (shift, scale, gate) for x:
/// x's shape, a per-sample [B, C] for x [B, L, C], or one row [1, C] for the
/// rows of x [N, C] (a sparse stage's sample). Element types aside.
bool isPerSampleOf(RankedTensorType x, RankedTensorType value);

/// "<name> must be <layout>, found <type>" unless `type` has rank `rank`.
LogicalResult verifyRank(Operation *op, StringRef name, RankedTensorType type,
                         int64_t rank, StringRef layout);

/// "<name> element type X differs from <refName> element type Y".
LogicalResult verifySameElementType(Operation *op, StringRef name, Type type,
                                    StringRef refName, Type refType);

/// "<what> differ: <aName> has A, <bName> has B" unless the sizes agree.
LogicalResult verifyDimsAgree(Operation *op, StringRef what, StringRef aName,
                              int64_t a, StringRef bName, int64_t b);

/// Checks that dimension 0 of the feature tensor `type` is the voxel
/// dimension of a structure (coordinate set, neighbour map, segments) of
/// upper bound `bound`: dynamic, with that bound.
LogicalResult verifyVoxelDim(Operation *op, StringRef name,
                             RankedTensorType type, int64_t bound,
                             StringRef owner);

/// "<name> must be > 0, found V" (or ">= 0" with `allowZero`).
LogicalResult verifyPositive(Operation *op, StringRef name, double value,
                             bool allowZero = false);

/// An attention op's `tiles` (trellis-tile-attention): absent, or a
/// non-empty list of distinct non-empty kernel names.
LogicalResult verifyAttentionTiles(Operation *op, ArrayAttr tiles);

/// An attention op's `precision`: absent, or "fp8_e4m3" with q, k and v of
/// head dim (last dimension) 64 and both head-norm gains (`hasGammas`); its
/// `vAmax` (static v scales): absent, or with that precision, one positive
/// finite value per head (q's second-to-last dimension).
LogicalResult verifyAttentionPrecision(Operation *op, StringAttr precision,
                                       DenseF32ArrayAttr vAmax,
                                       RankedTensorType q, RankedTensorType k,
                                       RankedTensorType v, bool hasGammas);

/// "axis A is out of range for rank R" unless `axis` normalizes.
LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank);

} // namespace mlir::trellis::detail

#endif // TRELLIS_DIALECT_TRELLISOPSUTILS_H
