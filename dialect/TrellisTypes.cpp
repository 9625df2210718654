//===- TrellisTypes.cpp - Types and attributes of the trellis dialect -----===//
#include "dialect/TrellisTypes.h"
#include "dialect/TrellisDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::trellis;

#include "dialect/TrellisOpsEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/TrellisOpsAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialect/TrellisOpsTypes.cpp.inc"

void TrellisDialect::registerTypesAndAttributes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialect/TrellisOpsTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/TrellisOpsAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// BoundsAttr
//===----------------------------------------------------------------------===//

LogicalResult BoundsAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayRef<int64_t> max) {
  if (max.empty())
    return emitError() << "#trellis.bounds needs at least one bound";
  for (int64_t m : max)
    if (m < 1)
      return emitError() << "#trellis.bounds entries must be >= 1, found " << m;
  return success();
}

ArrayRef<int64_t> mlir::trellis::getDynamicBounds(RankedTensorType type) {
  if (auto bounds = llvm::dyn_cast_or_null<BoundsAttr>(type.getEncoding()))
    return bounds.getMax();
  return {};
}

int64_t mlir::trellis::getDimUpperBound(RankedTensorType type, unsigned dim) {
  if (!type.isDynamicDim(dim))
    return type.getDimSize(dim);
  ArrayRef<int64_t> bounds = getDynamicBounds(type);
  unsigned dynIndex = type.getDynamicDimIndex(dim);
  return dynIndex < bounds.size() ? bounds[dynIndex] : ShapedType::kDynamic;
}

RankedTensorType
mlir::trellis::getBoundedTensorType(ArrayRef<int64_t> shape, Type elementType,
                                    ArrayRef<int64_t> dynamicBounds) {
  if (dynamicBounds.empty())
    return RankedTensorType::get(shape, elementType);
  return RankedTensorType::get(
      shape, elementType,
      BoundsAttr::get(elementType.getContext(), dynamicBounds));
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

LogicalResult CoordsType::verify(function_ref<InFlightDiagnostic()> emitError,
                                 int64_t resolution, int64_t bound) {
  if (resolution < 1 || resolution > 1024)
    return emitError() << "coordinate resolution must be in [1, 1024], found "
                       << resolution;
  if (bound < 1)
    return emitError() << "coordinate set bound must be >= 1, found " << bound;
  return success();
}

LogicalResult
NeighborMapType::verify(function_ref<InFlightDiagnostic()> emitError,
                        int64_t kernel, int64_t bound) {
  if (kernel < 1 || kernel % 2 == 0)
    return emitError() << "neighbour map kernel must be odd and >= 1, found "
                       << kernel;
  if (bound < 1)
    return emitError() << "neighbour map bound must be >= 1, found " << bound;
  return success();
}

LogicalResult SegmentsType::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t maxLength, int64_t bound) {
  if (maxLength < 1)
    return emitError() << "segment max_length must be >= 1, found "
                       << maxLength;
  if (bound < 1)
    return emitError() << "segments bound must be >= 1, found " << bound;
  return success();
}
