//===- TrellisOps.cpp - Verifiers and type inference of trellis ops -------===//
//
// Shape and dtype rules of the dense, elementwise and sampler ops (the sparse
// and mesh ops are in TrellisSparseOps.cpp). Messages name the operand and
// say what was expected and what was found; they reach users through the
// location of the op (their Python line or the model's module path).
//
// Verification order matters for the messages: verify() runs before the
// InferTypeOpInterface check (which MLIR runs with the region verifiers), so
// every operand rule is reported here by verify(); inferReturnTypes may
// assume valid operands but still fails cleanly for builders.
//
//===----------------------------------------------------------------------===//
#include "dialect/TrellisOps.h"
#include "dialect/TrellisOpsUtils.h"

#include "llvm/ADT/StringSet.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mlir::trellis;
using namespace mlir::trellis::detail;

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

LogicalResult mlir::trellis::OpTrait::verifyBoundedShapes(Operation *op) {
  auto check = [&](Type type, StringRef what, unsigned index) -> LogicalResult {
    auto ranked = dyn_cast<RankedTensorType>(type);
    if (!ranked)
      return success();
    auto bounds = dyn_cast_or_null<BoundsAttr>(ranked.getEncoding());
    if (!bounds && ranked.hasStaticShape())
      return success();
    if (!bounds)
      return op->emitOpError() << what << " #" << index << " of type " << ranked
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

LogicalResult
mlir::trellis::OpTrait::verifyResultsMatchInference(Operation *op) {
  auto infer = dyn_cast<InferTypeOpInterface>(op);
  if (!infer)
    return success();
  SmallVector<Type> inferred;
  if (failed(infer.inferReturnTypes(
          op->getContext(), op->getLoc(), op->getOperands(),
          op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
          op->getRegions(), inferred)))
    return failure();
  if (inferred.size() != op->getNumResults())
    return op->emitOpError("has ")
           << op->getNumResults() << " result(s) but " << inferred.size()
           << " inferred from its operands and attributes";
  for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
    if (type != inferred[i])
      return op->emitOpError("result #")
             << i << " has type " << type
             << " but the operands and attributes give " << inferred[i];
  return success();
}

std::string mlir::trellis::detail::dimToString(int64_t size) {
  return ShapedType::isDynamic(size) ? std::string("?") : std::to_string(size);
}

std::string mlir::trellis::detail::formatDouble(double value) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%g", value);
  return s;
}

std::string mlir::trellis::detail::shapeToString(RankedTensorType type) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(type.getShape()))
    s += (i ? ", " : "") + dimToString(d);
  return s + "]";
}

ShapeBuilder &ShapeBuilder::dim(RankedTensorType type, int64_t d) {
  return scaled(type, d, 1, 0);
}

ShapeBuilder &ShapeBuilder::dims(RankedTensorType type, int64_t begin,
                                 int64_t end) {
  for (int64_t d = begin; d < end; ++d)
    dim(type, d);
  return *this;
}

ShapeBuilder &ShapeBuilder::scaled(RankedTensorType type, int64_t d,
                                   int64_t mul, int64_t add) {
  if (!type.isDynamicDim(d))
    return size(type.getDimSize(d) * mul + add);
  int64_t bound = getDimUpperBound(type, d);
  return dynamic(ShapedType::isDynamic(bound) ? bound : bound * mul + add);
}

ShapeBuilder &ShapeBuilder::size(int64_t s) {
  shape.push_back(s);
  return *this;
}

ShapeBuilder &ShapeBuilder::dynamic(int64_t bound) {
  shape.push_back(ShapedType::kDynamic);
  if (ShapedType::isDynamic(bound) || bound < 1)
    unbounded = true;
  bounds.push_back(bound);
  return *this;
}

RankedTensorType ShapeBuilder::get(Type elementType) const {
  if (unbounded)
    return RankedTensorType::get(shape, elementType);
  return getBoundedTensorType(shape, elementType, bounds);
}

std::optional<int64_t> mlir::trellis::detail::normalizeAxis(int64_t axis,
                                                            int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

std::optional<int64_t>
mlir::trellis::detail::broadcastInto(RankedTensorType lhs, int64_t lhsRank,
                                     RankedTensorType rhs, int64_t rhsRank,
                                     ShapeBuilder &out) {
  int64_t rank = std::max(lhsRank, rhsRank);
  for (int64_t i = 0; i < rank; ++i) {
    int64_t li = i - (rank - lhsRank), ri = i - (rank - rhsRank);
    int64_t l = li >= 0 ? lhs.getDimSize(li) : 1;
    int64_t r = ri >= 0 ? rhs.getDimSize(ri) : 1;
    if (l == r || r == 1) {
      if (li >= 0)
        out.dim(lhs, li);
      else
        out.size(1);
    } else if (l == 1) {
      out.dim(rhs, ri);
    } else {
      return i;
    }
  }
  return std::nullopt;
}

LogicalResult mlir::trellis::detail::verifyRank(Operation *op, StringRef name,
                                                RankedTensorType type,
                                                int64_t rank,
                                                StringRef layout) {
  if (type.getRank() == rank)
    return success();
  return op->emitOpError() << name << " must be " << layout << " (rank " << rank
                           << "), found " << type;
}

LogicalResult mlir::trellis::detail::verifySameElementType(
    Operation *op, StringRef name, Type type, StringRef refName, Type refType) {
  Type a = getElementTypeOrSelf(type), b = getElementTypeOrSelf(refType);
  if (a == b)
    return success();
  return op->emitOpError() << name << " element type " << a << " differs from "
                           << refName << " element type " << b;
}

LogicalResult mlir::trellis::detail::verifyDimsAgree(Operation *op,
                                                     StringRef what,
                                                     StringRef aName, int64_t a,
                                                     StringRef bName,
                                                     int64_t b) {
  if (dimsAgree(a, b))
    return success();
  return op->emitOpError() << what << " differ: " << aName << " has "
                           << dimToString(a) << ", " << bName << " has "
                           << dimToString(b);
}

LogicalResult mlir::trellis::detail::verifyVoxelDim(Operation *op,
                                                    StringRef name,
                                                    RankedTensorType type,
                                                    int64_t bound,
                                                    StringRef owner) {
  if (type.getRank() >= 1 && type.isDynamicDim(0) &&
      getDimUpperBound(type, 0) == bound)
    return success();
  return op->emitOpError() << name
                           << " dimension 0 must be the voxel dimension of "
                           << owner << " (? with bound " << bound << "), found "
                           << type;
}

LogicalResult mlir::trellis::detail::verifyPositive(Operation *op,
                                                    StringRef name,
                                                    double value,
                                                    bool allowZero) {
  if (value > 0 || (allowZero && value == 0))
    return success();
  return op->emitOpError() << name << " must be " << (allowZero ? ">=" : ">")
                           << " 0, found " << formatDouble(value);
}

LogicalResult mlir::trellis::detail::verifyAttentionTiles(Operation *op,
                                                          ArrayAttr tiles) {
  if (!tiles)
    return success();
  if (tiles.empty())
    return op->emitOpError() << "tiles must name at least one kernel";
  llvm::StringSet<> seen;
  for (Attribute a : tiles) {
    StringRef name = cast<StringAttr>(a).getValue();
    if (name.empty())
      return op->emitOpError() << "tiles holds an empty kernel name";
    if (!seen.insert(name).second)
      return op->emitOpError() << "tiles names '" << name << "' twice";
  }
  return success();
}

LogicalResult mlir::trellis::detail::verifyAttentionPrecision(
    Operation *op, StringAttr precision, DenseF32ArrayAttr vAmax,
    RankedTensorType q, RankedTensorType k, RankedTensorType v,
    bool hasGammas) {
  if (vAmax && !precision)
    return op->emitOpError("v_amax (static v scales) needs precision "
                           "\"fp8_e4m3\"");
  if (!precision)
    return success();
  if (precision.getValue() != "fp8_e4m3")
    return op->emitOpError("precision must be \"fp8_e4m3\", found \"")
           << precision.getValue() << "\"";
  for (auto [name, type] :
       {std::pair{"q", q}, std::pair{"k", k}, std::pair{"v", v}}) {
    int64_t d = type.getShape().back();
    if (d != 64)
      return op->emitOpError("precision \"fp8_e4m3\" needs head dim 64, ")
             << name << " has " << dimToString(d);
  }
  // Its scales come from the head norms' gains.
  if (!hasGammas)
    return op->emitOpError(
        "precision \"fp8_e4m3\" needs q_gamma and k_gamma (the head RMS "
        "norms of q and k)");
  if (vAmax) {
    const int64_t heads = q.getDimSize(q.getRank() - 2);
    if (!ShapedType::isDynamic(heads) && int64_t(vAmax.size()) != heads)
      return op->emitOpError("v_amax must hold one value per head (")
             << heads << "), found " << vAmax.size();
    for (float a : vAmax.asArrayRef())
      if (!(a > 0.0f) || !std::isfinite(a))
        return op->emitOpError("v_amax values must be positive and finite, "
                               "found ")
               << a;
  }
  return success();
}

LogicalResult mlir::trellis::detail::verifyAxis(Operation *op, int64_t axis,
                                                int64_t rank) {
  if (normalizeAxis(axis, rank))
    return success();
  return op->emitOpError() << "axis " << axis << " is out of range for rank "
                           << rank << " (expected [" << -rank << ", " << rank
                           << "))";
}

/// The type `like` with its dimensions permuted/copied: dim i of the result
/// is dim origin[i] of `like`, bounds included.
static RankedTensorType inferBounded(RankedTensorType like,
                                     ArrayRef<int64_t> origin, Type element) {
  ShapeBuilder shape;
  for (int64_t d : origin)
    shape.dim(like, d);
  return shape.get(element);
}

/// Result type = the type of operand `value` (ops whose result has x's type).
static LogicalResult inferSameAs(Value value, SmallVectorImpl<Type> &inferred) {
  inferred.push_back(value.getType());
  return success();
}

//===----------------------------------------------------------------------===//
// WeightOp, ConstantOp, CastOp
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

LogicalResult ConstantOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    ConstantOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  ElementsAttr value = adaptor.getValue();
  if (!value)
    return emitOptionalError(location, "needs a value");
  inferredReturnTypes.push_back(value.getShapedType());
  return success();
}

LogicalResult ConstantOp::verify() {
  // The largest non-splat literal: anything bigger is a checkpoint tensor.
  constexpr int64_t kMaxElements = 65536;
  ElementsAttr value = getValue();
  if (!value.isSplat() && value.getNumElements() > kMaxElements)
    return emitOpError("a non-splat constant holds at most ")
           << kMaxElements << " elements, found " << value.getNumElements()
           << " (checkpoint tensors are trellis.weight)";
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult CastOp::verify() {
  auto in = getInput().getType();
  auto out = getResult().getType();
  if (in.getShape() != out.getShape() || in.getEncoding() != out.getEncoding())
    return emitOpError("result must have the input's shape and bounds, found ")
           << in << " -> " << out;
  Type from = in.getElementType(), to = out.getElementType();
  bool supported = (from.isF16() && to.isF32()) ||
                   (from.isF32() && to.isF16()) ||
                   (from.isInteger(32) && to.isF32());
  if (!supported)
    return emitOpError("unsupported cast from ")
           << from << " to " << to
           << " (supported: f16 -> f32, f32 -> f16, i32 -> f32)";
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise binary ops (NumPy broadcasting)
//===----------------------------------------------------------------------===//

static LogicalResult verifyBroadcast(Operation *op, RankedTensorType lhs,
                                     RankedTensorType rhs) {
  if (failed(verifySameElementType(op, "rhs", rhs, "lhs", lhs)))
    return failure();
  ShapeBuilder shape;
  if (auto bad = broadcastInto(lhs, lhs.getRank(), rhs, rhs.getRank(), shape))
    return op->emitOpError("shapes ")
           << shapeToString(lhs) << " and " << shapeToString(rhs)
           << " do not broadcast at dimension " << *bad;
  return success();
}

static LogicalResult inferBroadcast(std::optional<Location> location,
                                    RankedTensorType lhs, RankedTensorType rhs,
                                    SmallVectorImpl<Type> &results) {
  ShapeBuilder shape;
  if (broadcastInto(lhs, lhs.getRank(), rhs, rhs.getRank(), shape))
    return emitOptionalError(location, "shapes ", lhs, " and ", rhs,
                             " do not broadcast");
  results.push_back(shape.get(lhs.getElementType()));
  return success();
}

#define TRELLIS_BINARY_OP(OP)                                                  \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *context, std::optional<Location> location,                  \
      OP::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {       \
    return inferBroadcast(location,                                            \
                          cast<RankedTensorType>(adaptor.getLhs().getType()),  \
                          cast<RankedTensorType>(adaptor.getRhs().getType()),  \
                          inferredReturnTypes);                                \
  }                                                                            \
  LogicalResult OP::verify() {                                                 \
    return verifyBroadcast(*this, getLhs().getType(), getRhs().getType());     \
  }
TRELLIS_BINARY_OP(AddOp)
TRELLIS_BINARY_OP(SubOp)
TRELLIS_BINARY_OP(MulOp)
TRELLIS_BINARY_OP(DivOp)
TRELLIS_BINARY_OP(MaximumOp)
TRELLIS_BINARY_OP(PowOp)
TRELLIS_BINARY_OP(GreaterOp)
TRELLIS_BINARY_OP(LessOp)
TRELLIS_BINARY_OP(EqualOp)
#undef TRELLIS_BINARY_OP

LogicalResult WhereOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    WhereOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  SmallVector<Type, 1> condAndA;
  if (failed(inferBroadcast(
          location, cast<RankedTensorType>(adaptor.getCond().getType()),
          cast<RankedTensorType>(adaptor.getA().getType()), condAndA)))
    return failure();
  return inferBroadcast(location, cast<RankedTensorType>(condAndA.front()),
                        cast<RankedTensorType>(adaptor.getB().getType()),
                        inferredReturnTypes);
}

LogicalResult WhereOp::verify() {
  auto cond = getCond().getType(), a = getA().getType(), b = getB().getType();
  if (failed(verifyBroadcast(*this, cond, a)) ||
      failed(verifyBroadcast(*this, a, b)))
    return failure();
  SmallVector<Type, 1> condAndA;
  if (failed(inferBroadcast(std::nullopt, cond, a, condAndA)))
    return failure();
  return verifyBroadcast(*this, cast<RankedTensorType>(condAndA.front()), b);
}

//===----------------------------------------------------------------------===//
// ModulateOp, GatedResidualOp
//===----------------------------------------------------------------------===//

bool mlir::trellis::detail::isPerSampleOf(RankedTensorType x,
                                          RankedTensorType value) {
  if (value.getShape() == x.getShape() &&
      value.getEncoding() == x.getEncoding())
    return true;
  bool perSample = x.getRank() == 3 && value.getRank() == 2 &&
                   dimsAgree(value.getDimSize(0), x.getDimSize(0)) &&
                   dimsAgree(value.getDimSize(1), x.getDimSize(2));
  bool oneRow = x.getRank() == 2 && value.getRank() == 2 &&
                value.getDimSize(0) == 1 &&
                dimsAgree(value.getDimSize(1), x.getDimSize(1));
  return perSample || oneRow;
}

/// `value` (shift, scale or gate) has x's element type and is x's per-sample
/// vector (isPerSampleOf); `xName` names x in the messages.
static LogicalResult verifyPerSample(Operation *op, StringRef name,
                                     RankedTensorType x, RankedTensorType value,
                                     StringRef xName = "input") {
  if (failed(verifySameElementType(op, name, value, xName, x)))
    return failure();
  if (isPerSampleOf(x, value))
    return success();
  auto diag = op->emitOpError()
              << name << " must have the " << xName << "'s type " << x;
  if (x.getRank() == 3)
    diag << " or be a per-sample [B, C] = [" << dimToString(x.getDimSize(0))
         << ", " << dimToString(x.getDimSize(2)) << "]";
  if (x.getRank() == 2)
    diag << " or be one row [1, " << dimToString(x.getDimSize(1)) << "]";
  return diag << ", found " << value;
}

LogicalResult ModulateOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    ModulateOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  return inferSameAs(adaptor.getInput(), inferredReturnTypes);
}

LogicalResult ModulateOp::verify() {
  auto x = getInput().getType();
  if (failed(verifyPerSample(*this, "shift", x, getShift().getType())))
    return failure();
  return verifyPerSample(*this, "scale", x, getScale().getType());
}

LogicalResult LayerNormModulateOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    LayerNormModulateOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  return inferSameAs(adaptor.getInput(), inferredReturnTypes);
}

LogicalResult LayerNormModulateOp::verify() {
  auto x = getInput().getType();
  if (x.getRank() < 1)
    return emitOpError("input must have rank >= 1, found ") << x;
  if (failed(verifyPositive(*this, "eps", getEpsAttr().getValueAsDouble())) ||
      failed(verifyPerSample(*this, "shift", x, getShift().getType())))
    return failure();
  return verifyPerSample(*this, "scale", x, getScale().getType());
}

LogicalResult
GatedResidualOp::inferReturnTypes(MLIRContext *context,
                                  std::optional<Location> location,
                                  GatedResidualOp::Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferredReturnTypes) {
  return inferSameAs(adaptor.getInput(), inferredReturnTypes);
}

LogicalResult GatedResidualOp::verify() {
  auto x = getInput().getType();
  if (getH().getType() != x)
    return emitOpError("h must have the input's type ")
           << x << ", found " << getH().getType();
  return verifyPerSample(*this, "gate", x, getGate().getType());
}

LogicalResult GatedResidualNormOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    GatedResidualNormOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto x = cast<RankedTensorType>(adaptor.getInput().getType());
  inferredReturnTypes.push_back(x);
  inferredReturnTypes.push_back(
      adaptor.getF32Result() ? x.clone(Float32Type::get(context)) : x);
  return success();
}

LogicalResult GatedResidualNormOp::verify() {
  auto x = getInput().getType();
  if (x.getRank() < 1)
    return emitOpError("input must have rank >= 1, found ") << x;
  if (getH().getType() != x)
    return emitOpError("h must have the input's type ")
           << x << ", found " << getH().getType();
  if (!getShift() != !getScale())
    return emitOpError("modulate needs both shift and scale");
  if (!getWeight() != !getBias())
    return emitOpError("affine needs both weight and bias");
  if (getShift() && getWeight())
    return emitOpError("takes modulate or affine, not both");
  if (getF32Result() && getShift())
    return emitOpError("f32_result takes the LayerNorm form, not modulate");
  if (getF32Result() && !x.getElementType().isF16() &&
      !x.getElementType().isBF16())
    return emitOpError("f32_result needs an f16 or bf16 input, found ") << x;
  if (failed(verifyPositive(*this, "eps", getEpsAttr().getValueAsDouble())) ||
      failed(verifyPerSample(*this, "gate", x, getGate().getType())))
    return failure();
  if (Value plus = getPlus())
    if (failed(verifyPerSample(*this, "plus", x,
                               cast<RankedTensorType>(plus.getType()))))
      return failure();
  if (getShift() &&
      (failed(verifyPerSample(*this, "shift", x, getShift().getType())) ||
       failed(verifyPerSample(*this, "scale", x, getScale().getType()))))
    return failure();
  if (getWeight()) {
    int64_t c = x.getDimSize(x.getRank() - 1);
    for (auto [name, v] :
         {std::pair("weight", getWeight()), std::pair("bias", getBias())}) {
      auto t = cast<RankedTensorType>(v.getType());
      if (t.getRank() != 1 || t.getDimSize(0) != c)
        return emitOpError(name) << " must be [" << c << "], found " << t;
    }
  }
  return success();
}

LogicalResult LinearResidualNormOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    LinearResidualNormOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  Type x = adaptor.getX().getType();
  inferredReturnTypes.append({x, x});
  return success();
}

LogicalResult LinearResidualNormOp::verify() {
  auto a = getInput().getType();
  auto weight = getWeight().getType();
  auto bias = getBias().getType();
  auto x = getX().getType();
  if (a.getRank() < 1)
    return emitOpError("input must have rank >= 1, found ") << a;
  if (weight.getRank() != 2)
    return emitOpError("weight must be [N, K], found ") << weight;
  if (failed(verifySameElementType(*this, "weight", weight, "input", a)) ||
      failed(verifySameElementType(*this, "bias", bias, "input", a)) ||
      failed(verifySameElementType(*this, "residual", x, "input", a)))
    return failure();
  int64_t k = a.getShape().back(), n = weight.getDimSize(0);
  if (!dimsAgree(k, weight.getDimSize(1)))
    return emitOpError("input has ")
           << dimToString(k) << " features but the weight expects "
           << dimToString(weight.getDimSize(1)) << " (weight " << weight << ")";
  if (bias.getRank() != 1 || !dimsAgree(bias.getDimSize(0), n))
    return emitOpError("bias must be [")
           << dimToString(n) << "], found " << bias;
  // x is the linear's result type: the input's leading dimensions (and
  // bounds), then N.
  ShapeBuilder shape;
  shape.dims(a, 0, a.getRank() - 1).dim(weight, 0);
  RankedTensorType product = shape.get(a.getElementType());
  if (x != product)
    return emitOpError("residual must have the linear's result type ")
           << product
           << " (the input's leading dimensions, then N = " << dimToString(n)
           << "), found " << x;
  if (!getShift() != !getScale())
    return emitOpError("modulate needs both shift and scale");
  if (!getNormWeight() != !getNormBias())
    return emitOpError("affine needs both weight and bias");
  if (getShift() && getNormWeight())
    return emitOpError("takes modulate or affine, not both");
  if (getPlus() && !getGate())
    return emitOpError("plus needs a gate");
  if (failed(verifyPositive(*this, "eps", getEpsAttr().getValueAsDouble())))
    return failure();
  for (auto [name, v] :
       {std::pair("gate", getGate()), std::pair("plus", getPlus()),
        std::pair("shift", getShift()), std::pair("scale", getScale())})
    if (v &&
        failed(verifyPerSample(
            *this, name, x, cast<RankedTensorType>(v.getType()), "residual")))
      return failure();
  if (getNormWeight()) {
    for (auto [name, v] : {std::pair("norm weight", getNormWeight()),
                           std::pair("norm bias", getNormBias())}) {
      auto t = cast<RankedTensorType>(v.getType());
      if (t.getRank() != 1 || !dimsAgree(t.getDimSize(0), n))
        return emitOpError(name)
               << " must be [" << dimToString(n) << "], found " << t;
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// LinearOp, MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    LinearOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto weight = cast<RankedTensorType>(adaptor.getWeight().getType());
  if (input.getRank() < 1 || weight.getRank() != 2)
    return emitOptionalError(location, "expected input of rank >= 1 and a "
                                       "weight of rank 2");
  ShapeBuilder shape;
  shape.dims(input, 0, input.getRank() - 1).dim(weight, 0);
  inferredReturnTypes.push_back(shape.get(input.getElementType()));
  return success();
}

LogicalResult LinearOp::verify() {
  auto input = getInput().getType();
  auto weight = getWeight().getType();
  if (input.getRank() < 1)
    return emitOpError("input must have rank >= 1, found ") << input;
  if (weight.getRank() != 2)
    return emitOpError("weight must be [out, in], found ") << weight;
  if (failed(verifySameElementType(*this, "input", input, "weight", weight)))
    return failure();
  int64_t k = input.getShape().back();
  if (!dimsAgree(k, weight.getDimSize(1)))
    return emitOpError("input has ")
           << dimToString(k) << " features but the weight expects "
           << dimToString(weight.getDimSize(1)) << " (weight " << weight << ")";
  if (std::optional<StringRef> act = getActivation();
      act && *act != "gelu_tanh")
    return emitOpError("activation must be \"gelu_tanh\", found \"")
           << *act << "\"";
  if (std::optional<StringRef> precision = getPrecision()) {
    if (*precision != "tf32" && *precision != "fp8_e4m3")
      return emitOpError("precision must be \"tf32\" or \"fp8_e4m3\", "
                         "found \"")
             << *precision << "\"";
    if (*precision == "tf32" && !input.getElementType().isF32())
      return emitOpError("precision \"tf32\" applies to f32 operands, "
                         "found ")
             << input;
    if (*precision == "fp8_e4m3" && !input.getElementType().isF16())
      return emitOpError("precision \"fp8_e4m3\" applies to f16 operands, "
                         "found ")
             << input;
  }
  if (std::optional<APFloat> amax = getActivationAmax()) {
    if (getPrecision() != StringRef("fp8_e4m3"))
      return emitOpError("activation_amax (a static FP8 scale) needs "
                         "precision \"fp8_e4m3\"");
    if (!amax->isFiniteNonZero() || amax->isNegative())
      return emitOpError("activation_amax must be positive and finite, "
                         "found ")
             << amax->convertToFloat();
  }
  if (Value bias = getBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 ||
        !dimsAgree(biasType.getDimSize(0), weight.getDimSize(0)))
      return emitOpError("bias must be [")
             << dimToString(weight.getDimSize(0)) << "], found " << biasType;
    if (failed(
            verifySameElementType(*this, "bias", biasType, "weight", weight)))
      return failure();
  }
  if (Value residual = getResidual()) {
    if (!getBias() || getActivation())
      return emitOpError("a residual needs a bias and no activation");
    if (residual.getType() != getResult().getType())
      return emitOpError("residual must have the result's type ")
             << getResult().getType() << ", found " << residual.getType();
  }
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    MatmulOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  auto lhs = cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = cast<RankedTensorType>(adaptor.getRhs().getType());
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptionalError(location, "matmul operands need rank >= 2");
  ShapeBuilder shape;
  if (broadcastInto(lhs, lhs.getRank() - 2, rhs, rhs.getRank() - 2, shape))
    return emitOptionalError(location, "matmul batch dimensions of ", lhs,
                             " and ", rhs, " do not broadcast");
  shape.dim(lhs, lhs.getRank() - 2).dim(rhs, rhs.getRank() - 1);
  inferredReturnTypes.push_back(shape.get(lhs.getElementType()));
  return success();
}

LogicalResult MatmulOp::verify() {
  auto lhs = getLhs().getType();
  auto rhs = getRhs().getType();
  if (lhs.getRank() < 2)
    return emitOpError("lhs must be [..., M, K] (rank >= 2), found ") << lhs;
  if (rhs.getRank() < 2)
    return emitOpError("rhs must be [..., K, N] (rank >= 2), found ") << rhs;
  if (failed(verifySameElementType(*this, "rhs", rhs, "lhs", lhs)))
    return failure();
  if (failed(verifyDimsAgree(*this, "contraction sizes K", "lhs",
                             lhs.getShape().back(), "rhs",
                             rhs.getDimSize(rhs.getRank() - 2))))
    return failure();
  ShapeBuilder shape;
  if (auto bad =
          broadcastInto(lhs, lhs.getRank() - 2, rhs, rhs.getRank() - 2, shape))
    return emitOpError("batch dimensions of ")
           << shapeToString(lhs) << " and " << shapeToString(rhs)
           << " do not broadcast at dimension " << *bad;
  return success();
}

//===----------------------------------------------------------------------===//
// LayerNormOp, HeadRmsNormOp, SoftmaxOp
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    LayerNormOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  return inferSameAs(adaptor.getInput(), inferredReturnTypes);
}

LogicalResult LayerNormOp::verify() {
  auto x = getInput().getType();
  if (failed(verifyPositive(*this, "eps", getEpsAttr().getValueAsDouble())))
    return failure();
  int64_t rank = x.getRank();
  if (failed(verifyAxis(*this, getAxisAttr().getInt(), rank)))
    return failure();
  int64_t axis = *normalizeAxis(getAxisAttr().getInt(), rank);
  if (bool(getWeight()) != bool(getBias()))
    return emitOpError("weight and bias must be given together (both or "
                       "neither)");
  if (!getWeight())
    return success();
  int64_t c = x.getDimSize(axis);
  if (ShapedType::isDynamic(c))
    return emitOpError("an affine layer_norm needs a static normalized "
                       "dimension, found dimension ")
           << axis << " of " << x;
  for (auto [name, value] : {std::pair<StringRef, Value>{"weight", getWeight()},
                             {"bias", getBias()}}) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getRank() != 1 || type.getDimSize(0) != c)
      return emitOpError() << name << " must be [C] = [" << c
                           << "] (the size of dimension " << axis << "), found "
                           << type;
  }
  return success();
}

LogicalResult
HeadRmsNormOp::inferReturnTypes(MLIRContext *context,
                                std::optional<Location> location,
                                HeadRmsNormOp::Adaptor adaptor,
                                SmallVectorImpl<Type> &inferredReturnTypes) {
  return inferSameAs(adaptor.getInput(), inferredReturnTypes);
}

LogicalResult HeadRmsNormOp::verify() {
  auto x = getInput().getType();
  auto gamma = getGamma().getType();
  if (x.getRank() < 2)
    return emitOpError("input must be [..., H, d] (rank >= 2), found ") << x;
  int64_t h = x.getDimSize(x.getRank() - 2), d = x.getDimSize(x.getRank() - 1);
  if (ShapedType::isDynamic(h) || ShapedType::isDynamic(d))
    return emitOpError("the head dimensions [H, d] of the input must be "
                       "static, found ")
           << x;
  if (gamma.getRank() != 2 || gamma.getDimSize(0) != h ||
      gamma.getDimSize(1) != d)
    return emitOpError("gamma must be [H, d] = [")
           << h << ", " << d << "] (the input's last two dimensions), found "
           << gamma;
  return success();
}

LogicalResult SoftmaxOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SoftmaxOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  return inferSameAs(adaptor.getInput(), inferredReturnTypes);
}

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, getAxisAttr().getInt(),
                    getInput().getType().getRank());
}

//===----------------------------------------------------------------------===//
// ReduceOp
//===----------------------------------------------------------------------===//

LogicalResult ReduceOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    ReduceOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  auto x = cast<RankedTensorType>(adaptor.getInput().getType());
  std::optional<int64_t> axis =
      normalizeAxis(adaptor.getAxisAttr().getInt(), x.getRank());
  if (!axis)
    return emitOptionalError(location, "reduce: axis ",
                             adaptor.getAxisAttr().getInt(),
                             " is out of range for rank ", x.getRank());
  ShapeBuilder shape;
  shape.dims(x, 0, *axis);
  if (adaptor.getKeepdim())
    shape.size(1);
  shape.dims(x, *axis + 1, x.getRank());
  inferredReturnTypes.push_back(shape.get(x.getElementType()));
  return success();
}

LogicalResult ReduceOp::verify() {
  if (!llvm::is_contained({"sum", "mean", "max"}, getKind()))
    return emitOpError()
           << "kind must be \"sum\", \"mean\" or \"max\", found \"" << getKind()
           << "\"";
  return verifyAxis(*this, getAxisAttr().getInt(),
                    getInput().getType().getRank());
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    AttentionOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  auto q = cast<RankedTensorType>(adaptor.getQ().getType());
  auto v = cast<RankedTensorType>(adaptor.getV().getType());
  if (q.getRank() != 4 || v.getRank() != 4)
    return emitOptionalError(location, "attention needs rank-4 q and v");
  ShapeBuilder shape;
  shape.dims(q, 0, 3).dim(v, 3);
  inferredReturnTypes.push_back(shape.get(q.getElementType()));
  return success();
}

LogicalResult AttentionOp::verify() {
  auto q = getQ().getType(), k = getK().getType(), v = getV().getType();
  if (failed(verifyRank(*this, "q", q, 4, "[B, Lq, H, d]")) ||
      failed(verifyRank(*this, "k", k, 4, "[B, Lk, H, d]")) ||
      failed(verifyRank(*this, "v", v, 4, "[B, Lk, H, dv]")) ||
      failed(verifySameElementType(*this, "k", k, "q", q)) ||
      failed(verifySameElementType(*this, "v", v, "q", q)) ||
      failed(verifyDimsAgree(*this, "batch sizes", "q", q.getDimSize(0), "k",
                             k.getDimSize(0))) ||
      failed(verifyDimsAgree(*this, "batch sizes", "q", q.getDimSize(0), "v",
                             v.getDimSize(0))) ||
      failed(verifyDimsAgree(*this, "head counts", "q", q.getDimSize(2), "k",
                             k.getDimSize(2))) ||
      failed(verifyDimsAgree(*this, "head counts", "q", q.getDimSize(2), "v",
                             v.getDimSize(2))) ||
      failed(verifyDimsAgree(*this, "head dims", "q", q.getDimSize(3), "k",
                             k.getDimSize(3))) ||
      failed(verifyDimsAgree(*this, "key lengths", "k", k.getDimSize(1), "v",
                             v.getDimSize(1))))
    return failure();
  for (auto [name, gamma, x] : {std::tuple{"q_gamma", getQGamma(), q},
                                std::tuple{"k_gamma", getKGamma(), k}}) {
    if (!gamma)
      continue;
    auto g = cast<RankedTensorType>(gamma.getType());
    if (g.getRank() != 2 || !dimsAgree(g.getDimSize(0), x.getDimSize(2)) ||
        !dimsAgree(g.getDimSize(1), x.getDimSize(3)))
      return emitOpError() << name << " must be [H, d] = ["
                           << dimToString(x.getDimSize(2)) << ", "
                           << dimToString(x.getDimSize(3)) << "], found " << g;
  }
  if (failed(verifyAttentionPrecision(*this, getPrecisionAttr(), getVAmaxAttr(),
                                      q, k, v, getQGamma() && getKGamma())))
    return failure();
  if (getPrecisionAttr() && !q.isDynamicDim(1) && !k.isDynamicDim(1) &&
      q.getDimSize(1) != k.getDimSize(1))
    return emitOpError("precision \"fp8_e4m3\" is for self-attention, but "
                       "the sequence lengths differ: q has ")
           << q.getDimSize(1) << ", k has " << k.getDimSize(1);
  if (failed(verifyAttentionTiles(*this, getTilesAttr())))
    return failure();
  return verifyPositive(*this, "scale", getScaleAttr().getValueAsDouble());
}

//===----------------------------------------------------------------------===//
// TimestepEmbeddingOp, ApeOp
//===----------------------------------------------------------------------===//

LogicalResult TimestepEmbeddingOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    TimestepEmbeddingOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto t = cast<RankedTensorType>(adaptor.getT().getType());
  if (t.getRank() != 1)
    return emitOptionalError(location, "t must have rank 1");
  ShapeBuilder shape;
  shape.dim(t, 0).size(int64_t(adaptor.getDim()));
  inferredReturnTypes.push_back(shape.get(Float32Type::get(context)));
  return success();
}

LogicalResult TimestepEmbeddingOp::verify() {
  if (failed(verifyRank(*this, "t", getT().getType(), 1, "[B]")))
    return failure();
  int64_t dim = getDimAttr().getInt();
  if (dim < 2 || dim % 2 != 0)
    return emitOpError("dim must be even and >= 2, found ") << dim;
  return verifyPositive(*this, "max_period",
                        getMaxPeriodAttr().getValueAsDouble());
}

LogicalResult
ApeOp::inferReturnTypes(MLIRContext *context, std::optional<Location> location,
                        ApeOp::Adaptor adaptor,
                        SmallVectorImpl<Type> &inferredReturnTypes) {
  auto pos = cast<RankedTensorType>(adaptor.getPos().getType());
  if (pos.getRank() != 2)
    return emitOptionalError(location, "pos must have rank 2");
  ShapeBuilder shape;
  shape.dim(pos, 0).size(int64_t(adaptor.getChannels()));
  inferredReturnTypes.push_back(shape.get(Float32Type::get(context)));
  return success();
}

LogicalResult ApeOp::verify() {
  auto pos = getPos().getType();
  if (pos.getRank() != 2 || pos.getDimSize(1) != 3)
    return emitOpError("pos must be [L, 3] (x, y, z), found ") << pos;
  int64_t channels = getChannelsAttr().getInt();
  if (channels < 6)
    return emitOpError("channels must be >= 6 (floor(channels / 6) "
                       "frequencies per axis), found ")
           << channels;
  return success();
}

//===----------------------------------------------------------------------===//
// Conv3dOp, PixelShuffle3dOp
//===----------------------------------------------------------------------===//

LogicalResult Conv3dOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    Conv3dOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  auto x = cast<RankedTensorType>(adaptor.getInput().getType());
  auto w = cast<RankedTensorType>(adaptor.getWeight().getType());
  if (x.getRank() != 5 || w.getRank() != 5 || w.isDynamicDim(2))
    return emitOptionalError(location, "conv3d needs rank-5 input and weight");
  int64_t shift = 2 * int64_t(adaptor.getPadding()) - w.getDimSize(2) + 1;
  ShapeBuilder shape;
  shape.dim(x, 0).dim(w, 0);
  for (int64_t d = 2; d < 5; ++d)
    shape.scaled(x, d, 1, shift);
  inferredReturnTypes.push_back(shape.get(x.getElementType()));
  return success();
}

LogicalResult Conv3dOp::verify() {
  auto x = getInput().getType(), w = getWeight().getType();
  if (failed(verifyRank(*this, "input", x, 5, "[B, I, D, H, W]")) ||
      failed(verifyRank(*this, "weight", w, 5, "[O, I, k, k, k]")))
    return failure();
  if (!w.hasStaticShape())
    return emitOpError("weight must have a static shape, found ") << w;
  int64_t k = w.getDimSize(2);
  if (w.getDimSize(3) != k || w.getDimSize(4) != k)
    return emitOpError("weight kernel must be cubic (k x k x k), found ")
           << w.getDimSize(2) << "x" << w.getDimSize(3) << "x"
           << w.getDimSize(4);
  if (failed(verifySameElementType(*this, "weight", w, "input", x)) ||
      failed(verifyDimsAgree(*this, "input channels", "input", x.getDimSize(1),
                             "weight", w.getDimSize(1))))
    return failure();
  if (Value bias = getBias()) {
    auto b = cast<RankedTensorType>(bias.getType());
    if (b.getRank() != 1 || b.getDimSize(0) != w.getDimSize(0))
      return emitOpError("bias must be [")
             << w.getDimSize(0) << "], found " << b;
    if (failed(verifySameElementType(*this, "bias", b, "input", x)))
      return failure();
  }
  int64_t padding = getPaddingAttr().getInt();
  if (padding < 0)
    return emitOpError("padding must be >= 0, found ") << padding;
  for (int64_t d = 2; d < 5; ++d) {
    int64_t size = getDimUpperBound(x, d);
    if (!ShapedType::isDynamic(size) && size + 2 * padding - k + 1 < 1)
      return emitOpError("output dimension ")
             << d << " would be empty: input size " << size << ", padding "
             << padding << ", kernel " << k;
  }
  return success();
}

LogicalResult
PixelShuffle3dOp::inferReturnTypes(MLIRContext *context,
                                   std::optional<Location> location,
                                   PixelShuffle3dOp::Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferredReturnTypes) {
  auto x = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t f = adaptor.getFactor();
  if (x.getRank() != 5 || f < 1 || x.isDynamicDim(1))
    return emitOptionalError(location, "pixel_shuffle_3d needs a rank-5 input "
                                       "with static channels");
  ShapeBuilder shape;
  shape.dim(x, 0).size(x.getDimSize(1) / (f * f * f));
  for (int64_t d = 2; d < 5; ++d)
    shape.scaled(x, d, f);
  inferredReturnTypes.push_back(shape.get(x.getElementType()));
  return success();
}

LogicalResult PixelShuffle3dOp::verify() {
  auto x = getInput().getType();
  if (failed(verifyRank(*this, "input", x, 5, "[B, C*f^3, D, H, W]")))
    return failure();
  int64_t f = getFactorAttr().getInt();
  if (f < 1)
    return emitOpError("factor must be >= 1, found ") << f;
  int64_t c = x.getDimSize(1);
  if (ShapedType::isDynamic(c) || c % (f * f * f) != 0)
    return emitOpError("input channels (")
           << dimToString(c)
           << ") must be a static multiple of factor^3 = " << f * f * f;
  return success();
}

//===----------------------------------------------------------------------===//
// ReshapeOp, PermuteOp, ConcatOp, SplitOp
//===----------------------------------------------------------------------===//

/// Product of the static sizes times the bounds of the dynamic ones.
static int64_t maxElementCount(RankedTensorType type) {
  int64_t count = 1;
  for (int64_t d = 0; d < type.getRank(); ++d)
    count *= getDimUpperBound(type, d);
  return count;
}

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (failed(verifySameElementType(*this, "result", out, "input", in)))
    return failure();
  int64_t inDyn = in.getNumDynamicDims(), outDyn = out.getNumDynamicDims();
  if (inDyn > 1 || outDyn > 1 || inDyn != outDyn)
    return emitOpError("input and result must both be static or both have "
                       "exactly one dynamic dimension, found ")
           << in << " -> " << out;
  if (inDyn == 0) {
    if (in.getNumElements() != out.getNumElements())
      return emitOpError("element counts differ: input ")
             << in << " has " << in.getNumElements() << ", result " << out
             << " has " << out.getNumElements();
    return success();
  }
  int64_t inMax = maxElementCount(in), outMax = maxElementCount(out);
  if (inMax != outMax)
    return emitOpError("maximal element counts differ: input ")
           << in << " holds up to " << inMax << ", result " << out << " up to "
           << outMax;
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  // reshape(reshape(x)) -> reshape(x): both keep the row-major order. With a
  // dynamic dimension x has one too (the verifier's rule), and the maximal
  // element counts of all three types agree.
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

LogicalResult PermuteOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    PermuteOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  auto x = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if (int64_t(perm.size()) != x.getRank() ||
      llvm::any_of(perm, [&](int64_t p) { return p < 0 || p >= x.getRank(); }))
    return emitOptionalError(location, "invalid permutation");
  inferredReturnTypes.push_back(inferBounded(x, perm, x.getElementType()));
  return success();
}

LogicalResult PermuteOp::verify() {
  int64_t rank = getInput().getType().getRank();
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<bool> seen(rank, false);
  bool valid = int64_t(perm.size()) == rank;
  for (int64_t p : perm) {
    if (!valid || p < 0 || p >= rank || seen[p]) {
      valid = false;
      break;
    }
    seen[p] = true;
  }
  if (valid)
    return success();
  auto diag = emitOpError("perm must be a permutation of 0..")
              << rank - 1 << ", found [";
  llvm::interleaveComma(perm, diag);
  return diag << "]";
}

LogicalResult ConcatOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    ConcatOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return emitOptionalError(location, "concat needs at least one input");
  auto first = cast<RankedTensorType>(inputs.front().getType());
  auto axis = normalizeAxis(int64_t(adaptor.getAxis()), first.getRank());
  if (!axis)
    return emitOptionalError(location, "concat axis out of range");
  ShapeBuilder shape;
  for (int64_t d = 0; d < first.getRank(); ++d) {
    if (d != *axis) {
      shape.dim(first, d);
      continue;
    }
    bool dynamic = false;
    int64_t total = 0;
    for (Value input : inputs) {
      auto type = cast<RankedTensorType>(input.getType());
      if (type.getRank() != first.getRank())
        return emitOptionalError(location, "concat inputs differ in rank");
      dynamic |= type.isDynamicDim(d);
      int64_t bound = getDimUpperBound(type, d);
      total = ShapedType::isDynamic(bound) || ShapedType::isDynamic(total)
                  ? ShapedType::kDynamic
                  : total + bound;
    }
    if (dynamic)
      shape.dynamic(total);
    else
      shape.size(total);
  }
  inferredReturnTypes.push_back(shape.get(first.getElementType()));
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  auto first = cast<RankedTensorType>(getInputs().front().getType());
  int64_t rank = first.getRank();
  if (failed(verifyAxis(*this, getAxisAttr().getInt(), rank)))
    return failure();
  int64_t axis = *normalizeAxis(getAxisAttr().getInt(), rank);
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    auto type = cast<RankedTensorType>(input.getType());
    if (failed(verifySameElementType(*this, "input #" + std::to_string(i), type,
                                     "input #0", first)))
      return failure();
    if (type.getRank() != rank)
      return emitOpError("input #") << i << " has rank " << type.getRank()
                                    << " but input #0 has " << rank;
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && !dimsAgree(type.getDimSize(d), first.getDimSize(d)))
        return emitOpError("input #")
               << i << " dimension " << d << " ("
               << dimToString(type.getDimSize(d)) << ") differs from input #0 ("
               << dimToString(first.getDimSize(d)) << ")";
  }
  return success();
}

LogicalResult SplitOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SplitOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  auto x = cast<RankedTensorType>(adaptor.getInput().getType());
  auto axis = normalizeAxis(int64_t(adaptor.getAxis()), x.getRank());
  if (!axis)
    return emitOptionalError(location, "split axis out of range");
  for (int64_t size : adaptor.getSizes()) {
    ShapeBuilder shape;
    shape.dims(x, 0, *axis).size(size).dims(x, *axis + 1, x.getRank());
    inferredReturnTypes.push_back(shape.get(x.getElementType()));
  }
  return success();
}

LogicalResult SplitOp::verify() {
  auto x = getInput().getType();
  if (failed(verifyAxis(*this, getAxisAttr().getInt(), x.getRank())))
    return failure();
  int64_t axis = *normalizeAxis(getAxisAttr().getInt(), x.getRank());
  ArrayRef<int64_t> sizes = getSizes();
  if (sizes.size() != getNumResults())
    return emitOpError("has ")
           << getNumResults() << " results but " << sizes.size()
           << " sizes (one result per size)";
  for (int64_t size : sizes)
    if (size < 1)
      return emitOpError("split sizes must be >= 1, found ") << size;
  int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
  if (x.isDynamicDim(axis) || total != x.getDimSize(axis))
    return emitOpError("sizes sum to ")
           << total << " but dimension " << axis << " has size "
           << dimToString(x.getDimSize(axis));
  return success();
}

LogicalResult SplitOp::canonicalize(SplitOp op, PatternRewriter &rewriter) {
  if (op.getNumResults() != 1)
    return failure();
  Value input = op.getInput();
  Type type = op.getResult(0).getType();
  if (input.getType() == type)
    rewriter.replaceOp(op, input);
  else
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, type, input);
  return success();
}

//===----------------------------------------------------------------------===//
// BroadcastRowsOp
//===----------------------------------------------------------------------===//

LogicalResult BroadcastRowsOp::verify() {
  auto row = getRow().getType(), result = getResult().getType();
  if (row.getRank() < 2 || row.getDimSize(0) != 1 || !row.hasStaticShape())
    return emitOpError("row must be a static [1, R...] tensor of rank >= 2, "
                       "found ")
           << row;
  if (failed(verifySameElementType(*this, "result", result, "row", row)))
    return failure();
  ArrayRef<int64_t> trailing = row.getShape().drop_front();
  if (result.getRank() < row.getRank() ||
      result.getShape().take_back(trailing.size()) != trailing)
    return emitOpError("result must be [N..., ")
           << shapeToString(row).substr(4) << " (row's dimensions after the "
           << "first, after one or more leading ones), found " << result;
  Value like = getLike();
  if (result.hasStaticShape()) {
    if (like)
      return emitOpError("a static result takes no 'like' operand");
    return success();
  }
  if (!like)
    return emitOpError("the dynamic result ")
           << result << " needs a 'like' operand for its leading dimensions";
  auto likeType = cast<RankedTensorType>(like.getType());
  int64_t lead = getNumLeadingDims();
  if (likeType.getRank() < lead)
    return emitOpError("'like' must have at least the result's ")
           << lead << " leading dimension(s), found " << likeType;
  for (int64_t d = 0; d < lead; ++d)
    if (likeType.getDimSize(d) != result.getDimSize(d) ||
        getDimUpperBound(likeType, d) != getDimUpperBound(result, d))
      return emitOpError("leading dimension ")
             << d << " of the result " << result << " differs from that of "
             << "'like' " << likeType;
  return success();
}

OpFoldResult BroadcastRowsOp::fold(FoldAdaptor) {
  // One row repeated once.
  if (getRow().getType() == getResult().getType())
    return getRow();
  return {};
}

//===----------------------------------------------------------------------===//
// FlowSampleOp, CfgCombineOp, EulerUpdateOp
//===----------------------------------------------------------------------===//

LogicalResult FlowSampleOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    FlowSampleOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  return inferSameAs(adaptor.getNoise(), inferredReturnTypes);
}

LogicalResult FlowSampleOp::verify() {
  auto noise = getNoise().getType();
  auto cond = getCond().getType(), neg = getNegCond().getType();
  if (!noise.getElementType().isF32())
    return emitOpError("noise must be f32 (the sampler state), found ")
           << noise;
  if (cond.getRank() != 3 || !cond.hasStaticShape())
    return emitOpError("cond must be a static [N, Lc, Cc] tensor, found ")
           << cond;
  if (failed(verifySameElementType(*this, "neg_cond", neg, "cond", cond)))
    return failure();
  if (neg.getRank() != 3 || !neg.hasStaticShape() ||
      neg.getDimSize(1) != cond.getDimSize(1) ||
      neg.getDimSize(2) != cond.getDimSize(2))
    return emitOpError("neg_cond must be a static [1 or B, ")
           << cond.getDimSize(1) << ", " << cond.getDimSize(2)
           << "] tensor, found " << neg;
  if (getStepsAttr().getInt() < 1)
    return emitOpError("steps must be >= 1, found ") << getStepsAttr().getInt();
  if (failed(verifyPositive(*this, "rescale_t",
                            getRescaleTAttr().getValueAsDouble())) ||
      failed(verifyPositive(*this, "sigma_min",
                            getSigmaMinAttr().getValueAsDouble(),
                            /*allowZero=*/true)) ||
      failed(verifyPositive(*this, "cfg_strength",
                            getCfgStrengthAttr().getValueAsDouble(),
                            /*allowZero=*/true)))
    return failure();
  ArrayRef<double> interval = getCfgInterval();
  if (interval.size() != 2 || interval[0] > interval[1]) {
    auto diag = emitOpError("cfg_interval must be [lo, hi] with lo <= hi, "
                            "found [");
    llvm::interleaveComma(interval, diag,
                          [&](double v) { diag << formatDouble(v); });
    return diag << "]";
  }
  return success();
}

SmallVector<Region *> FlowSampleOp::getLoopRegions() {
  SmallVector<Region *> regions{&getBody()};
  if (isSpecialized())
    regions.push_back(&getUncondBody());
  if (hasSharedPrefix())
    regions.push_back(&getSharedBody());
  return regions;
}

/// The two-region form: (x, τ) -> velocity in each region.
static LogicalResult verifySpecialized(FlowSampleOp op) {
  auto noise = op.getNoise().getType();
  if (op.getMultiImage() != MultiImageMode::none)
    return op.emitOpError("the two-region form needs multi_image mode none");
  int64_t b = -1;
  // The shared prefix's values: arguments 2.. of the branch regions.
  SmallVector<Type> shared;
  if (op.hasSharedPrefix()) {
    auto yield = dyn_cast<SharedYieldOp>(op.getSharedBody().front().back());
    if (!yield)
      return op.emitOpError("shared region must end with trellis.shared_yield");
    llvm::append_range(shared, yield.getValues().getTypes());
  }
  for (auto [i, region] : llvm::enumerate(op->getRegions())) {
    if (region.empty())
      continue;
    StringRef name = i == 0   ? "body"
                     : i == 1 ? "uncond region"
                              : "shared region";
    Block &block = region.front();
    size_t expected = i == 2 ? 2 : 2 + shared.size();
    if (block.getNumArguments() != expected)
      return op.emitOpError()
             << name << " must take " << expected << " arguments (x, tau"
             << (expected > 2 ? ", the shared values" : "") << ") in "
             << "the two-region form, found " << block.getNumArguments();
    for (size_t a = 2; a < expected; ++a)
      if (block.getArgument(a).getType() != shared[a - 2])
        return op.emitOpError()
               << name << " argument #" << a << " must have the type of shared "
               << "value #" << a - 2 << ", " << shared[a - 2] << ", found "
               << block.getArgument(a).getType();
    if (block.getArgument(0).getType() != noise)
      return op.emitOpError()
             << name << " argument #0 (x) must have the noise type " << noise
             << ", found " << block.getArgument(0).getType();
    auto tau = dyn_cast<RankedTensorType>(block.getArgument(1).getType());
    if (!tau || tau.getRank() != 1 || !tau.hasStaticShape() ||
        !tau.getElementType().isF32() || (b >= 0 && tau.getDimSize(0) != b))
      return op.emitOpError()
             << name << " argument #1 (tau) must be tensor<Bxf32> (one B for "
             << "both regions), found " << block.getArgument(1).getType();
    b = tau.getDimSize(0);
    if (i == 2)
      continue; // ends in shared_yield (above)
    auto yield = dyn_cast<YieldOp>(block.back());
    if (!yield)
      return op.emitOpError() << name << " must end with trellis.yield";
    if (yield.getValue().getType() != noise)
      return yield.emitOpError("yields ")
             << yield.getValue().getType()
             << " but the velocity must have x's type " << noise;
  }
  for (auto [name, value] : {std::pair{"cond", op.getCond()},
                             std::pair{"neg_cond", op.getNegCond()}}) {
    int64_t batch = cast<RankedTensorType>(value.getType()).getDimSize(0);
    if (batch != 1 && batch != b)
      return op.emitOpError()
             << name << " must have batch 1 or B = " << b
             << " in the two-region form, found " << value.getType();
  }
  if (noise.getRank() >= 1 && !noise.isDynamicDim(0) &&
      noise.getDimSize(0) != b)
    return op.emitOpError("noise batch ")
           << noise.getDimSize(0) << " differs from the body's batch B = " << b;
  return success();
}

LogicalResult FlowSampleOp::verifyRegions() {
  if (hasSharedPrefix() && !isSpecialized())
    return emitOpError("a shared region needs the two-region form");
  if (isSpecialized())
    return verifySpecialized(*this);
  Block &body = getBody().front();
  auto noise = getNoise().getType(), cond = getCond().getType();
  if (body.getNumArguments() != 3)
    return emitOpError("body must take 3 arguments (x, tau, c), found ")
           << body.getNumArguments();
  Type x = body.getArgument(0).getType();
  if (x != noise)
    return emitOpError("body argument #0 (x) must have the noise type ")
           << noise << ", found " << x;
  auto tau = dyn_cast<RankedTensorType>(body.getArgument(1).getType());
  if (!tau || tau.getRank() != 1 || !tau.hasStaticShape() ||
      !tau.getElementType().isF32())
    return emitOpError("body argument #1 (tau) must be tensor<Bxf32>, found ")
           << body.getArgument(1).getType();
  int64_t b = tau.getDimSize(0);
  auto c = dyn_cast<RankedTensorType>(body.getArgument(2).getType());
  if (!c ||
      c.getShape() !=
          ArrayRef<int64_t>{b, cond.getDimSize(1), cond.getDimSize(2)} ||
      c.getElementType() != cond.getElementType() || c.getEncoding())
    return emitOpError("body argument #2 (c) must be [B, Lc, Cc] = [")
           << b << ", " << cond.getDimSize(1) << ", " << cond.getDimSize(2)
           << "] of cond's element type " << cond.getElementType() << ", found "
           << body.getArgument(2).getType();
  int64_t condBatch = cond.getDimSize(0),
          negBatch = getNegCond().getType().getDimSize(0);
  if (getMultiImage() == MultiImageMode::none && condBatch != 1 &&
      condBatch != b)
    return emitOpError("cond batch ") << condBatch << " must be 1 or B = " << b
                                      << " with multi_image mode none";
  if (negBatch != 1 && negBatch != b)
    return emitOpError("neg_cond batch ")
           << negBatch << " must be 1 or B = " << b;
  if (noise.getRank() >= 1 && !noise.isDynamicDim(0) &&
      noise.getDimSize(0) != b)
    return emitOpError("noise batch ")
           << noise.getDimSize(0) << " differs from the body's batch B = " << b;
  auto yield = body.empty() ? YieldOp() : dyn_cast<YieldOp>(body.back());
  if (!yield)
    return emitOpError("body must end with trellis.yield");
  if (yield.getValue().getType() != noise)
    return yield.emitOpError("yields ")
           << yield.getValue().getType()
           << " but the velocity must have x's type " << noise;
  return success();
}

LogicalResult CfgCombineOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    CfgCombineOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  return inferSameAs(adaptor.getVc(), inferredReturnTypes);
}

LogicalResult CfgCombineOp::verify() {
  if (getVu().getType() != getVc().getType())
    return emitOpError("vu must have vc's type ")
           << getVc().getType() << ", found " << getVu().getType();
  return verifyPositive(*this, "strength", getStrengthAttr().getValueAsDouble(),
                        /*allowZero=*/true);
}

LogicalResult
EulerUpdateOp::inferReturnTypes(MLIRContext *context,
                                std::optional<Location> location,
                                EulerUpdateOp::Adaptor adaptor,
                                SmallVectorImpl<Type> &inferredReturnTypes) {
  return inferSameAs(adaptor.getInput(), inferredReturnTypes);
}

LogicalResult EulerUpdateOp::verify() {
  if (getV().getType() != getInput().getType())
    return emitOpError("v must have the input's type ")
           << getInput().getType() << ", found " << getV().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// TimeGridOp, TimeRowOp
//===----------------------------------------------------------------------===//

LogicalResult TimeGridOp::verify() {
  int64_t steps = getStepsAttr().getInt();
  if (steps < 1)
    return emitOpError("steps must be >= 1, found ") << steps;
  auto type = cast<RankedTensorType>(getResult().getType());
  if (type.getRank() != 1 || type.isDynamicDim(0) || type.getDimSize(0) < steps)
    return emitOpError("result must be a static [R] tensor with R >= steps (")
           << steps << "), found " << type;
  return verifyPositive(*this, "rescale_t",
                        getRescaleTAttr().getValueAsDouble());
}

LogicalResult TimeRowOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    TimeRowOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  auto table = cast<RankedTensorType>(adaptor.getTable().getType());
  auto tau = cast<RankedTensorType>(adaptor.getTau().getType());
  if (table.getRank() < 2)
    return emitOptionalError(location, "table must have rank >= 2");
  if (tau.getRank() != 1)
    return emitOptionalError(location, "tau must have rank 1");
  ShapeBuilder shape;
  shape.dim(tau, 0).dims(table, 1, table.getRank());
  inferredReturnTypes.push_back(shape.get(table.getElementType()));
  return success();
}

LogicalResult TimeRowOp::verify() {
  auto table = getTable().getType(), grid = getGrid().getType();
  if (grid.getRank() != 1 || !grid.hasStaticShape())
    return emitOpError("grid must be a static [S] tensor, found ") << grid;
  if (table.getRank() < 2 || !table.hasStaticShape() ||
      table.getDimSize(0) != grid.getDimSize(0))
    return emitOpError("table must be a static [")
           << grid.getDimSize(0) << ", D...] tensor (one row per grid value), "
           << "found " << table;
  return verifyRank(*this, "tau", getTau().getType(), 1, "[B]");
}

#define GET_OP_CLASSES
#include "dialect/TrellisOps.cpp.inc"
