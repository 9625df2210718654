//===- TrellisTypes.h - Types and attributes of the trellis -----*- C++ -*-===//
#ifndef TRELLIS_DIALECT_TRELLISTYPES_H
#define TRELLIS_DIALECT_TRELLISTYPES_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#include "dialect/TrellisOpsEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/TrellisOpsAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialect/TrellisOpsTypes.h.inc"

namespace mlir::trellis {

/// The upper bounds of `type`'s dynamic dimensions (empty if static or
/// unbounded).
ArrayRef<int64_t> getDynamicBounds(RankedTensorType type);

/// The upper bound of dimension `dim` of `type`: the static size, or the
/// #trellis.bounds entry of a dynamic dimension (ShapedType::kDynamic if the
/// type has no bounds).
int64_t getDimUpperBound(RankedTensorType type, unsigned dim);

/// A ranked tensor type of `shape` and `elementType` whose dynamic dimensions
/// get the given upper bounds (in order); no encoding when all are static.
RankedTensorType getBoundedTensorType(ArrayRef<int64_t> shape, Type elementType,
                                      ArrayRef<int64_t> dynamicBounds);

} // namespace mlir::trellis

#endif // TRELLIS_DIALECT_TRELLISTYPES_H
