//===- KernelBuilder.cpp - Kernel types, shapes and checks ----------------===//
//
// The helpers of KernelBuilder.h: kernel argument types of an op, the rows a
// dynamic-row kernel is built for, and the checks of what a kernel supports.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/KernelBuilder.h"

#include "dialect/TrellisTypes.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace trellis::codegen::detail {

// (Documented in KernelBuilder.h.)

Value KernelBuilder::toE4M3(Value y, Type roundTo, Value quantize) {
  Value scaled = arith::MulFOp::create(
      b, loc, toF32(fromF32(y, roundTo)),
      splat(quantize, cast<VectorType>(y.getType()).getNumElements()));
  const int64_t v = cast<VectorType>(scaled.getType()).getNumElements();
  assert(v % 2 == 0 && "E4M3 values are converted in pairs");
  Type i16 = b.getI16Type(), e4m3 = b.getType<Float8E4M3FNType>();
  Value pairs = zeroOf(VectorType::get({v / 2}, i16));
  for (int64_t i = 0; i < v / 2; ++i) {
    // The conversion puts its first operand in the upper byte: element
    // 2i + 1 there, so that the little-endian bytes are in element order.
    Value pair = NVVM::ConvertF32x2ToF8x2Op::create(
        b, loc, i16, lane(scaled, 2 * i + 1), lane(scaled, 2 * i),
        NVVM::FPRoundingMode::RN, NVVM::SaturationMode::SATFINITE,
        /*relu=*/false, e4m3);
    pairs = vector::InsertOp::create(b, loc, pair, pairs, ArrayRef<int64_t>{i});
  }
  return vector::BitCastOp::create(b, loc, VectorType::get({v}, b.getI8Type()),
                                   pairs);
}

SmallVector<int64_t> boundShape(Type t, int64_t bound) {
  SmallVector<int64_t> shape(cast<RankedTensorType>(t).getShape());
  if (!shape.empty() && ShapedType::isDynamic(shape[0]))
    shape[0] = bound;
  return shape;
}

MemRefType flatMemRef(Type t, int64_t bound) {
  auto rt = cast<RankedTensorType>(t);
  return MemRefType::get({product(boundShape(t, bound))}, rt.getElementType());
}

SmallVector<Type> tensorArgs(Operation *op, int64_t bound) {
  SmallVector<Type> types;
  for (Type t : op->getOperandTypes())
    types.push_back(flatMemRef(t, bound));
  for (Type t : op->getResultTypes())
    types.push_back(flatMemRef(t, bound));
  if (bound > 0)
    types.push_back(IntegerType::get(op->getContext(), 64));
  return types;
}

int64_t addressableRows(RankedTensorType t) {
  int64_t bound = mlir::trellis::getDimUpperBound(t, 0);
  int64_t row = std::max<int64_t>(1, product(t.getShape().drop_front()));
  return std::min(bound, kMaxElements / row);
}

int64_t ownRows(Type t) {
  auto rt = cast<RankedTensorType>(t);
  return rt.hasStaticShape() ? int64_t(0) : addressableRows(rt);
}

FailureOr<int64_t> rowBound(Operation *op) {
  int64_t bound = 0;
  auto visit = [&](Type t) -> LogicalResult {
    auto rt = dyn_cast<RankedTensorType>(t);
    if (!rt || rt.hasStaticShape())
      return success();
    for (int64_t d = 1; d < rt.getRank(); ++d)
      if (rt.isDynamicDim(d))
        return op->emitError()
               << "has no GPU implementation for the dynamic shape " << t
               << " (only dimension 0 may be dynamic)";
    int64_t b = mlir::trellis::getDimUpperBound(rt, 0);
    if (ShapedType::isDynamic(b))
      return op->emitError() << "has no GPU implementation for " << t
                             << ": dimension 0 has no #trellis.bounds bound";
    b = addressableRows(rt);
    bound = bound ? std::min(bound, b) : b;
    return success();
  };
  for (Type t : op->getResultTypes())
    if (failed(visit(t)))
      return failure();
  for (Type t : op->getOperandTypes())
    if (failed(visit(t)))
      return failure();
  return bound;
}

LogicalResult checkKernelTensor(Operation *op, Type t, int64_t bound) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt)
    return op->emitError() << "has no GPU implementation: operand type " << t
                           << " is not a tensor";
  if (!rt.hasStaticShape() && bound == 0)
    return op->emitError() << "has no GPU implementation for the dynamic shape "
                           << t << " (sparse tensors run on the host)";
  if (product(boundShape(rt, bound)) > kMaxElements)
    return op->emitError() << "has no GPU implementation: " << t
                           << " has 2^31 or more elements"
                           << (bound ? " at its bound" : "");
  Type et = rt.getElementType();
  if (!et.isF16() && !et.isF32() && !et.isInteger(32) && !et.isInteger(64))
    return op->emitError() << "has no GPU implementation for element type "
                           << et;
  return success();
}

LogicalResult checkStatic(Operation *op, int64_t bound) {
  for (Type t : op->getOperandTypes())
    if (failed(checkKernelTensor(op, t, bound)))
      return failure();
  for (Type t : op->getResultTypes())
    if (failed(checkKernelTensor(op, t, bound)))
      return failure();
  return success();
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

Type elemOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

double floatAttrOr(Operation *op, StringRef name, double dflt) {
  if (auto a = op->getAttrOfType<FloatAttr>(name))
    return a.getValueAsDouble();
  return dflt;
}

int64_t intAttrOr(Operation *op, StringRef name, int64_t dflt) {
  if (auto a = op->getAttrOfType<IntegerAttr>(name))
    return a.getInt();
  return dflt;
}

} // namespace trellis::codegen::detail
