//===- TrellisOps.cpp - Verifiers and type inference of trellis ops ---------===//
//
// Shape and dtype rules of every op. Messages name the operand and say what
// was expected and what was found; they reach users through the location of
// the op (their Python line or the model's module path).
//
//===----------------------------------------------------------------------===//
#include "dialect/TrellisOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::trellis;

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

LogicalResult mlir::trellis::OpTrait::verifyBoundedShapes(Operation *op) {
  auto check = [&](Type type, StringRef what, unsigned index) -> LogicalResult {
    auto ranked = dyn_cast<RankedTensorType>(type);
    if (!ranked || ranked.hasStaticShape())
      return success();
    auto bounds = dyn_cast_or_null<BoundsAttr>(ranked.getEncoding());
    if (!bounds)
      return op->emitOpError() << what << " #" << index << " of type "
                               << ranked
                               << " has a dynamic dimension without a "
                                  "#trellis.bounds upper bound";
    if (bounds.getMax().size() != size_t(ranked.getNumDynamicDims()))
      return op->emitOpError()
             << what << " #" << index << " of type " << ranked << " has "
             << ranked.getNumDynamicDims() << " dynamic dimension(s) but "
             << bounds.getMax().size() << " bound(s)";
    return success();
  };
  for (auto [i, t] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(t, "operand", i)))
      return failure();
  for (auto [i, t] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(t, "result", i)))
      return failure();
  return success();
}

/// Shape `shape` with its dynamic dims bounded like the dims of `like` that
/// they came from. `origin[i]` is the dim of `like` that dim i copies, or -1
/// for a static dim.
static RankedTensorType inferBounded(RankedTensorType like,
                                     ArrayRef<int64_t> shape,
                                     ArrayRef<int64_t> origin, Type element) {
  SmallVector<int64_t> bounds;
  for (auto [i, d] : llvm::enumerate(shape))
    if (ShapedType::isDynamic(d))
      bounds.push_back(getDimUpperBound(like, origin[i]));
  return getBoundedTensorType(shape, element, bounds);
}

//===----------------------------------------------------------------------===//
// WeightOp
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty tensor name");
  if (getModel().empty())
    return emitOpError("needs a non-empty model key");
  if (!getType().hasStaticShape())
    return emitOpError("weight shapes are static, found ") << getType();
  return success();
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    LinearOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto weight = cast<RankedTensorType>(adaptor.getWeight().getType());
  if (input.getRank() < 1 || weight.getRank() != 2)
    return emitOptionalError(location, "expected input of rank >= 1 and a "
                                       "weight of rank 2");
  SmallVector<int64_t> shape(input.getShape());
  SmallVector<int64_t> origin = llvm::to_vector(
      llvm::seq<int64_t>(0, input.getRank()));
  shape.back() = weight.getDimSize(0);
  inferredReturnTypes.push_back(
      inferBounded(input, shape, origin, input.getElementType()));
  return success();
}

LogicalResult LinearOp::verify() {
  auto input = getInput().getType();
  auto weight = getWeight().getType();
  if (weight.getRank() != 2)
    return emitOpError("weight must be [out, in], found ") << weight;
  if (input.getElementType() != weight.getElementType())
    return emitOpError("input element type ")
           << input.getElementType() << " differs from weight element type "
           << weight.getElementType() << " (insert a trellis.cast)";
  int64_t k = input.getShape().back();
  if (!ShapedType::isDynamic(k) && k != weight.getDimSize(1))
    return emitOpError("input has ")
           << k << " features but the weight expects " << weight.getDimSize(1)
           << " (weight " << weight << ")";
  if (Value bias = getBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 || biasType.getDimSize(0) != weight.getDimSize(0))
      return emitOpError("bias must be [")
             << weight.getDimSize(0) << "], found " << biasType;
    if (biasType.getElementType() != weight.getElementType())
      return emitOpError("bias element type ")
             << biasType.getElementType() << " differs from weight element type "
             << weight.getElementType();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise binary ops (NumPy broadcasting)
//===----------------------------------------------------------------------===//

static LogicalResult inferBroadcast(std::optional<Location> location,
                                    RankedTensorType lhs, RankedTensorType rhs,
                                    SmallVectorImpl<Type> &results) {
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(location, "operand element types differ: ",
                             lhs.getElementType(), " vs ",
                             rhs.getElementType());
  int64_t rank = std::max(lhs.getRank(), rhs.getRank());
  SmallVector<int64_t> shape(rank), bounds;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t li = i - (rank - lhs.getRank()), ri = i - (rank - rhs.getRank());
    int64_t l = li >= 0 ? lhs.getDimSize(li) : 1;
    int64_t r = ri >= 0 ? rhs.getDimSize(ri) : 1;
    if (l == r || r == 1) {
      shape[i] = l;
      if (ShapedType::isDynamic(l))
        bounds.push_back(getDimUpperBound(lhs, li));
    } else if (l == 1) {
      shape[i] = r;
      if (ShapedType::isDynamic(r))
        bounds.push_back(getDimUpperBound(rhs, ri));
    } else {
      return emitOptionalError(location, "shapes ", lhs, " and ", rhs,
                               " do not broadcast at dimension ", i);
    }
  }
  results.push_back(getBoundedTensorType(shape, lhs.getElementType(), bounds));
  return success();
}

#define TRELLIS_BINARY_INFER(OP)                                               \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *context, std::optional<Location> location,                  \
      OP::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {       \
    return inferBroadcast(                                                     \
        location, cast<RankedTensorType>(adaptor.getLhs().getType()),          \
        cast<RankedTensorType>(adaptor.getRhs().getType()),                    \
        inferredReturnTypes);                                                  \
  }
TRELLIS_BINARY_INFER(AddOp)
#undef TRELLIS_BINARY_INFER

//===----------------------------------------------------------------------===//
// Sparse ops
//===----------------------------------------------------------------------===//

LogicalResult NeighborMapOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    NeighborMapOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  auto coords = cast<CoordsType>(adaptor.getCoords().getType());
  int64_t kernel = adaptor.getKernel();
  if (kernel % 2 == 0)
    return emitOptionalError(location, "kernel must be odd, found ", kernel);
  inferredReturnTypes.push_back(
      NeighborMapType::get(context, kernel, coords.getBound()));
  return success();
}

#define GET_OP_CLASSES
#include "dialect/TrellisOps.cpp.inc"
