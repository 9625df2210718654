//===- TrellisSparseOps.cpp - Sparse and mesh ops of the trellis dialect --===//
//
// Verifiers and type inference of the ops on coordinate sets and on sparse
// features (spec §5.3, §6, §7). A feature tensor's dimension 0 is the voxel
// dimension of the structure it belongs to: dynamic, with that structure's
// bound (verifyVoxelDim).
//
//===----------------------------------------------------------------------===//
#include "dialect/TrellisOps.h"
#include "dialect/TrellisOpsUtils.h"

#include "mlir/IR/PatternMatch.h"

#include <limits>

using namespace mlir;
using namespace mlir::trellis;
using namespace mlir::trellis::detail;

/// The largest resolution of a coordinate set (CoordsType's limit).
static constexpr int64_t kMaxResolution = 1024;

//===----------------------------------------------------------------------===//
// Coordinate sets
//===----------------------------------------------------------------------===//

LogicalResult OccupancyOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    OccupancyOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  auto logits = cast<RankedTensorType>(adaptor.getLogits().getType());
  if (logits.getRank() != 5 || logits.isDynamicDim(2))
    return emitOptionalError(location,
                             "occupancy needs [B, 1, R, R, R] logits");
  int64_t r = logits.getDimSize(2);
  int64_t batch = getDimUpperBound(logits, 0);
  if (r < 1 || r > kMaxResolution || ShapedType::isDynamic(batch))
    return emitOptionalError(location, "invalid occupancy grid ", logits);
  inferredReturnTypes.push_back(CoordsType::get(context, r, batch * r * r * r));
  return success();
}

LogicalResult OccupancyOp::verify() {
  auto logits = getLogits().getType();
  if (failed(verifyRank(*this, "logits", logits, 5, "[B, 1, R, R, R]")))
    return failure();
  int64_t r = logits.getDimSize(2);
  if (logits.getDimSize(1) != 1 || ShapedType::isDynamic(r) ||
      logits.getDimSize(3) != r || logits.getDimSize(4) != r)
    return emitOpError("logits must be [B, 1, R, R, R] with a static cubic "
                       "grid, found ")
           << logits;
  if (r > kMaxResolution)
    return emitOpError("grid resolution ")
           << r << " exceeds the coordinate limit " << kMaxResolution;
  return success();
}

LogicalResult SparseNeighborMapOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseNeighborMapOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto coords = cast<CoordsType>(adaptor.getCoords().getType());
  int64_t kernel = adaptor.getKernel();
  if (kernel < 1 || kernel % 2 == 0)
    return emitOptionalError(location, "kernel must be odd, found ", kernel);
  inferredReturnTypes.push_back(
      NeighborMapType::get(context, kernel, coords.getBound()));
  return success();
}

LogicalResult SparseNeighborMapOp::verify() {
  int64_t kernel = getKernelAttr().getInt();
  if (kernel < 1 || kernel % 2 == 0)
    return emitOpError("kernel must be odd and >= 1, found ") << kernel;
  return success();
}

LogicalResult
SparseCoarsenOp::inferReturnTypes(MLIRContext *context,
                                  std::optional<Location> location,
                                  SparseCoarsenOp::Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferredReturnTypes) {
  auto coords = cast<CoordsType>(adaptor.getCoords().getType());
  int64_t factor = adaptor.getFactor();
  if (factor < 2 || coords.getResolution() % factor != 0)
    return emitOptionalError(location, "invalid coarsening factor ", factor);
  inferredReturnTypes.push_back(CoordsType::get(
      context, coords.getResolution() / factor, coords.getBound()));
  return success();
}

LogicalResult SparseCoarsenOp::verify() {
  int64_t factor = getFactorAttr().getInt();
  int64_t resolution = getCoords().getType().getResolution();
  if (factor < 2)
    return emitOpError("factor must be >= 2, found ") << factor;
  if (resolution % factor != 0)
    return emitOpError("factor ")
           << factor << " does not divide the resolution " << resolution;
  return success();
}

LogicalResult SparseSubdivideOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseSubdivideOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto coords = cast<CoordsType>(adaptor.getCoords().getType());
  if (2 * coords.getResolution() > kMaxResolution)
    return emitOptionalError(location, "subdivided resolution too large");
  inferredReturnTypes.push_back(CoordsType::get(
      context, 2 * coords.getResolution(), 8 * coords.getBound()));
  return success();
}

LogicalResult SparseSubdivideOp::verify() {
  int64_t resolution = getCoords().getType().getResolution();
  if (2 * resolution > kMaxResolution)
    return emitOpError("subdividing resolution ")
           << resolution << " exceeds the coordinate limit " << kMaxResolution;
  return success();
}

/// [bound, columns] i32: the rows of a coordinate set as a tensor.
static LogicalResult inferCoordColumns(MLIRContext *context, Value coords,
                                       int64_t columns,
                                       SmallVectorImpl<Type> &inferred) {
  ShapeBuilder shape;
  shape.dynamic(cast<CoordsType>(coords.getType()).getBound()).size(columns);
  inferred.push_back(shape.get(IntegerType::get(context, 32)));
  return success();
}

LogicalResult SparseXyzOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseXyzOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  return inferCoordColumns(context, adaptor.getCoords(), 3,
                           inferredReturnTypes);
}

LogicalResult
SparseToTensorOp::inferReturnTypes(MLIRContext *context,
                                   std::optional<Location> location,
                                   SparseToTensorOp::Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferredReturnTypes) {
  return inferCoordColumns(context, adaptor.getCoords(), 4,
                           inferredReturnTypes);
}

LogicalResult SparseFromTensorOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseFromTensorOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto t = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t resolution = adaptor.getResolution();
  int64_t bound = t.getRank() == 2 ? getDimUpperBound(t, 0) : 0;
  if (resolution < 1 || resolution > kMaxResolution ||
      ShapedType::isDynamic(bound) || bound < 1)
    return emitOptionalError(location, "invalid coordinate tensor ", t);
  inferredReturnTypes.push_back(CoordsType::get(context, resolution, bound));
  return success();
}

LogicalResult SparseFromTensorOp::verify() {
  auto t = getInput().getType();
  if (t.getRank() != 2 || t.getDimSize(1) != 4)
    return emitOpError("input must be [N, 4] rows (b, x, y, z), found ") << t;
  if (getDimUpperBound(t, 0) < 1)
    return emitOpError("input must have at least one row (bound >= 1), "
                       "found ")
           << t;
  int64_t resolution = getResolutionAttr().getInt();
  if (resolution < 1 || resolution > kMaxResolution)
    return emitOpError("resolution must be in [1, ")
           << kMaxResolution << "], found " << resolution;
  return success();
}

LogicalResult SparseBatchSegmentsOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseBatchSegmentsOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  int64_t bound = cast<CoordsType>(adaptor.getCoords().getType()).getBound();
  inferredReturnTypes.push_back(SegmentsType::get(context, bound, bound));
  return success();
}

LogicalResult SparseWindowSegmentsOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseWindowSegmentsOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  int64_t bound = cast<CoordsType>(adaptor.getCoords().getType()).getBound();
  int64_t window = adaptor.getWindow();
  if (window < 1)
    return emitOptionalError(location, "window must be >= 1");
  inferredReturnTypes.push_back(
      SegmentsType::get(context, window * window * window, bound));
  return success();
}

LogicalResult SparseWindowSegmentsOp::verify() {
  int64_t window = getWindowAttr().getInt(), shift = getShiftAttr().getInt();
  if (window < 1)
    return emitOpError("window must be >= 1, found ") << window;
  if (shift < 0 || shift >= window)
    return emitOpError("shift must be in [0, ")
           << window << "), found " << shift;
  return success();
}

//===----------------------------------------------------------------------===//
// Sparse features
//===----------------------------------------------------------------------===//

/// [voxel dim with `bound`, dimensions 1.. of `like`] of `like`'s element type.
static RankedTensorType rowsLike(RankedTensorType like, int64_t bound) {
  ShapeBuilder shape;
  shape.dynamic(bound).dims(like, 1, like.getRank());
  return shape.get(like.getElementType());
}

LogicalResult
SparseConv3dOp::inferReturnTypes(MLIRContext *context,
                                 std::optional<Location> location,
                                 SparseConv3dOp::Adaptor adaptor,
                                 SmallVectorImpl<Type> &inferredReturnTypes) {
  auto feats = cast<RankedTensorType>(adaptor.getFeats().getType());
  auto w = cast<RankedTensorType>(adaptor.getWeight().getType());
  if (feats.getRank() != 2 || w.getRank() != 5)
    return emitOptionalError(location, "sparse.conv3d needs [N, I] features "
                                       "and a rank-5 weight");
  ShapeBuilder shape;
  // Through a parent neighbour map the feats are the coarse rows and the
  // output has the map's (fine) rows.
  Value neighbors = adaptor.getNeighbors();
  if (neighbors && neighbors.getDefiningOp<SparseParentNeighborMapOp>())
    shape.dynamic(cast<NeighborMapType>(neighbors.getType()).getBound())
        .dim(w, 0);
  else
    shape.dim(feats, 0).dim(w, 0);
  inferredReturnTypes.push_back(shape.get(feats.getElementType()));
  return success();
}

LogicalResult SparseConv3dOp::verify() {
  auto feats = getFeats().getType(), w = getWeight().getType();
  if (failed(verifyRank(*this, "feats", feats, 2, "[N, I]")) ||
      failed(verifyRank(*this, "weight", w, 5, "[O, k, k, k, I] (KRSC)")))
    return failure();
  if (!w.hasStaticShape())
    return emitOpError("weight must have a static shape, found ") << w;
  int64_t k = w.getDimSize(1);
  if (w.getDimSize(2) != k || w.getDimSize(3) != k)
    return emitOpError("weight kernel must be cubic (k x k x k), found ")
           << w.getDimSize(1) << "x" << w.getDimSize(2) << "x"
           << w.getDimSize(3);
  if (k % 2 == 0)
    return emitOpError("kernel size must be odd, found ") << k;
  if (failed(verifySameElementType(*this, "weight", w, "feats", feats)) ||
      failed(verifyDimsAgree(*this, "input channels", "feats",
                             feats.getDimSize(1), "weight", w.getDimSize(4))))
    return failure();
  if (Value bias = getBias()) {
    auto b = cast<RankedTensorType>(bias.getType());
    if (b.getRank() != 1 || b.getDimSize(0) != w.getDimSize(0))
      return emitOpError("bias must be [")
             << w.getDimSize(0) << "], found " << b;
    if (failed(verifySameElementType(*this, "bias", b, "feats", feats)))
      return failure();
  }
  Value neighbors = getNeighbors();
  if (k == 1) {
    if (neighbors)
      return emitOpError("a 1x1x1 convolution takes no neighbour map (it is "
                         "spconv's conv1x1 path)");
    return success();
  }
  if (!neighbors)
    return emitOpError("a ")
           << k << "x" << k << "x" << k
           << " convolution needs a neighbour map of kernel " << k;
  auto map = cast<NeighborMapType>(neighbors.getType());
  if (map.getKernel() != k)
    return emitOpError("neighbour map kernel ")
           << map.getKernel() << " differs from the weight's kernel " << k;
  // A parent neighbour map points at the rows of its coarse set.
  if (auto parents = neighbors.getDefiningOp<SparseParentNeighborMapOp>())
    return verifyVoxelDim(*this, "feats", feats,
                          parents.getCoarse().getType().getBound(),
                          "the parent neighbour map's coarse set");
  return verifyVoxelDim(*this, "feats", feats, map.getBound(),
                        "the neighbour map");
}

LogicalResult SparseParentNeighborMapOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseParentNeighborMapOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  inferredReturnTypes.push_back(adaptor.getNeighbors().getType());
  return success();
}

LogicalResult SparseDownsampleOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseDownsampleOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto feats = cast<RankedTensorType>(adaptor.getFeats().getType());
  auto coarse = cast<CoordsType>(adaptor.getCoarse().getType());
  inferredReturnTypes.push_back(rowsLike(feats, coarse.getBound()));
  return success();
}

/// fine.resolution == 2 · coarse.resolution.
static LogicalResult verifyFactorTwo(Operation *op, CoordsType fine,
                                     CoordsType coarse) {
  if (fine.getResolution() == 2 * coarse.getResolution())
    return success();
  return op->emitOpError("fine resolution ")
         << fine.getResolution() << " must be twice the coarse resolution "
         << coarse.getResolution();
}

LogicalResult SparseDownsampleOp::verify() {
  auto fine = getFine().getType(), coarse = getCoarse().getType();
  if (failed(verifyFactorTwo(*this, fine, coarse)) ||
      failed(verifyRank(*this, "feats", getFeats().getType(), 2, "[N, C]")))
    return failure();
  return verifyVoxelDim(*this, "feats", getFeats().getType(), fine.getBound(),
                        "the fine coordinate set");
}

LogicalResult SparseParentNeighborMapOp::verify() {
  auto fine = getFine().getType(), coarse = getCoarse().getType();
  if (failed(verifyFactorTwo(*this, fine, coarse)))
    return failure();
  auto map = getNeighbors().getType();
  if (map.getBound() != fine.getBound())
    return emitOpError("the neighbour map (bound ")
           << map.getBound() << ") must be the fine set's (bound "
           << fine.getBound() << ")";
  return success();
}

LogicalResult
SparseUpsampleOp::inferReturnTypes(MLIRContext *context,
                                   std::optional<Location> location,
                                   SparseUpsampleOp::Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferredReturnTypes) {
  auto feats = cast<RankedTensorType>(adaptor.getFeats().getType());
  auto fine = cast<CoordsType>(adaptor.getFine().getType());
  inferredReturnTypes.push_back(rowsLike(feats, fine.getBound()));
  return success();
}

LogicalResult SparseUpsampleOp::verify() {
  auto fine = getFine().getType(), coarse = getCoarse().getType();
  if (failed(verifyFactorTwo(*this, fine, coarse)) ||
      failed(verifyRank(*this, "feats", getFeats().getType(), 2, "[N', C]")))
    return failure();
  return verifyVoxelDim(*this, "feats", getFeats().getType(), coarse.getBound(),
                        "the coarse coordinate set");
}

LogicalResult SparseSubdivideFeaturesOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseSubdivideFeaturesOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto feats = cast<RankedTensorType>(adaptor.getFeats().getType());
  if (feats.getRank() != 2)
    return emitOptionalError(location, "feats must have rank 2");
  ShapeBuilder shape;
  shape.scaled(feats, 0, 8).dim(feats, 1);
  inferredReturnTypes.push_back(shape.get(feats.getElementType()));
  return success();
}

LogicalResult SparseSubdivideFeaturesOp::verify() {
  return verifyRank(*this, "feats", getFeats().getType(), 2, "[N, C]");
}

LogicalResult SparseGroupNormOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseGroupNormOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  inferredReturnTypes.push_back(adaptor.getFeats().getType());
  return success();
}

LogicalResult SparseGroupNormOp::verify() {
  auto feats = getFeats().getType();
  if (failed(verifyRank(*this, "feats", feats, 2, "[N, C]")) ||
      failed(verifyVoxelDim(*this, "feats", feats,
                            getCoords().getType().getBound(),
                            "the coordinate set")))
    return failure();
  int64_t c = feats.getDimSize(1), groups = getGroupsAttr().getInt();
  if (ShapedType::isDynamic(c))
    return emitOpError("feats must have a static channel count, found ")
           << feats;
  if (groups < 1 || c % groups != 0)
    return emitOpError("groups ")
           << groups << " must be >= 1 and divide the channel count " << c;
  for (auto [name, value] : {std::pair<StringRef, Value>{"weight", getWeight()},
                             {"bias", getBias()}}) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getRank() != 1 || type.getDimSize(0) != c)
      return emitOpError() << name << " must be [C] = [" << c << "], found "
                           << type;
  }
  return verifyPositive(*this, "eps", getEpsAttr().getValueAsDouble());
}

LogicalResult SparseBatchBroadcastOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseBatchBroadcastOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto values = cast<RankedTensorType>(adaptor.getValues().getType());
  if (values.getRank() != 2)
    return emitOptionalError(location, "values must have rank 2");
  inferredReturnTypes.push_back(rowsLike(
      values, cast<CoordsType>(adaptor.getCoords().getType()).getBound()));
  return success();
}

LogicalResult SparseBatchBroadcastOp::verify() {
  return verifyRank(*this, "values", getValues().getType(), 2, "[B, C]");
}

//===----------------------------------------------------------------------===//
// Resampling index arrays and the ops that use them (the GPU form of the
// sparse resampling ops, trellis-partition-cuda)
//===----------------------------------------------------------------------===//

/// An i32 [N] index tensor of `bound` rows.
static RankedTensorType indexTensor(MLIRContext *context, int64_t bound) {
  ShapeBuilder shape;
  shape.dynamic(bound);
  return shape.get(IntegerType::get(context, 32));
}

LogicalResult SparseParentRowsOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseParentRowsOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto fine = cast<CoordsType>(adaptor.getFine().getType());
  inferredReturnTypes.push_back(indexTensor(context, fine.getBound()));
  return success();
}

LogicalResult SparseParentRowsOp::verify() {
  return verifyFactorTwo(*this, getFine().getType(), getCoarse().getType());
}

LogicalResult SparseChildRowsOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseChildRowsOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto fine = cast<CoordsType>(adaptor.getFine().getType());
  auto coarse = cast<CoordsType>(adaptor.getCoarse().getType());
  inferredReturnTypes.push_back(indexTensor(context, coarse.getBound() + 1));
  inferredReturnTypes.push_back(indexTensor(context, fine.getBound()));
  return success();
}

LogicalResult SparseChildRowsOp::verify() {
  return verifyFactorTwo(*this, getFine().getType(), getCoarse().getType());
}

LogicalResult SparseBatchIndexOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseBatchIndexOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto coords = cast<CoordsType>(adaptor.getCoords().getType());
  inferredReturnTypes.push_back(indexTensor(context, coords.getBound()));
  return success();
}

LogicalResult GatherRowsOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    GatherRowsOp::Adaptor adaptor, SmallVectorImpl<Type> &inferredReturnTypes) {
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  auto index = cast<RankedTensorType>(adaptor.getIndex().getType());
  if (x.getRank() < 1 || index.getRank() != 1)
    return emitOptionalError(location, "gather_rows needs x [M, ...] and an "
                                       "index [N]");
  ShapeBuilder shape;
  shape.dim(index, 0).dims(x, 1, x.getRank());
  inferredReturnTypes.push_back(shape.get(x.getElementType()));
  return success();
}

LogicalResult GatherRowsOp::verify() {
  if (getX().getType().getRank() < 1)
    return emitOpError("x must have rank >= 1, found ") << getX().getType();
  return verifyRank(*this, "index", getIndex().getType(), 1, "[N]");
}

LogicalResult
SegmentMeanOp::inferReturnTypes(MLIRContext *context,
                                std::optional<Location> location,
                                SegmentMeanOp::Adaptor adaptor,
                                SmallVectorImpl<Type> &inferredReturnTypes) {
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  auto offsets = cast<RankedTensorType>(adaptor.getOffsets().getType());
  if (x.getRank() != 2 || offsets.getRank() != 1)
    return emitOptionalError(location, "segment_mean needs x [M, C] and "
                                       "offsets [S + 1]");
  ShapeBuilder shape;
  shape.scaled(offsets, 0, 1, -1).dim(x, 1);
  inferredReturnTypes.push_back(shape.get(x.getElementType()));
  return success();
}

LogicalResult SegmentMeanOp::verify() {
  if (failed(verifyRank(*this, "x", getX().getType(), 2, "[M, C]")) ||
      failed(
          verifyRank(*this, "offsets", getOffsets().getType(), 1, "[S + 1]")) ||
      failed(verifyRank(*this, "rows", getRows().getType(), 1, "[K]")))
    return failure();
  // (The I64Attr accessor is unsigned: read the attribute's signed value.)
  if (int64_t extra = getExtraCountAttr().getInt(); extra < 0)
    return emitOpError("extra_count must be >= 0, found ") << extra;
  return success();
}

namespace {
/// One sample: the modulation operands take the [1, C] row itself (ops whose
/// verifier accepts a row broadcast over the rows of x [N, C]).
struct ForwardSingleSampleRow : OpRewritePattern<SparseBatchBroadcastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SparseBatchBroadcastOp op,
                                PatternRewriter &rewriter) const override {
    auto values = cast<RankedTensorType>(op.getValues().getType());
    if (values.getRank() != 2 || values.getDimSize(0) != 1)
      return failure();
    bool changed = false;
    for (OpOperand &use : llvm::make_early_inc_range(op->getUses())) {
      Operation *user = use.getOwner();
      unsigned i = use.getOperandNumber();
      bool modulation =
          (isa<ModulateOp, LayerNormModulateOp>(user) && (i == 1 || i == 2)) ||
          (isa<GatedResidualOp>(user) && i == 2);
      if (!modulation ||
          cast<RankedTensorType>(user->getOperand(0).getType()).getRank() != 2)
        continue;
      rewriter.modifyOpInPlace(user, [&] { use.set(op.getValues()); });
      changed = true;
    }
    return success(changed);
  }
};
} // namespace

void SparseBatchBroadcastOp::getCanonicalizationPatterns(
    RewritePatternSet &results, MLIRContext *context) {
  results.add<ForwardSingleSampleRow>(context);
}

LogicalResult SparseAttentionOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseAttentionOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto q = cast<RankedTensorType>(adaptor.getQ().getType());
  auto v = cast<RankedTensorType>(adaptor.getV().getType());
  if (q.getRank() != 3 || v.getRank() != 3)
    return emitOptionalError(location, "sparse.attention needs rank-3 q, v");
  ShapeBuilder shape;
  shape.dims(q, 0, 2).dim(v, 2);
  inferredReturnTypes.push_back(shape.get(q.getElementType()));
  return success();
}

LogicalResult SparseAttentionOp::verify() {
  auto q = getQ().getType(), k = getK().getType(), v = getV().getType();
  int64_t bound = getSegments().getType().getBound();
  if (failed(verifyRank(*this, "q", q, 3, "[N, H, d]")) ||
      failed(verifyRank(*this, "k", k, 3, "[N, H, d]")) ||
      failed(verifyRank(*this, "v", v, 3, "[N, H, dv]")) ||
      failed(verifySameElementType(*this, "k", k, "q", q)) ||
      failed(verifySameElementType(*this, "v", v, "q", q)) ||
      failed(verifyVoxelDim(*this, "q", q, bound, "the segments")) ||
      failed(verifyVoxelDim(*this, "k", k, bound, "the segments")) ||
      failed(verifyVoxelDim(*this, "v", v, bound, "the segments")) ||
      failed(verifyDimsAgree(*this, "head counts", "q", q.getDimSize(1), "k",
                             k.getDimSize(1))) ||
      failed(verifyDimsAgree(*this, "head counts", "q", q.getDimSize(1), "v",
                             v.getDimSize(1))) ||
      failed(verifyDimsAgree(*this, "head dims", "q", q.getDimSize(2), "k",
                             k.getDimSize(2))))
    return failure();
  for (auto [name, gamma, x] : {std::tuple{"q_gamma", getQGamma(), q},
                                std::tuple{"k_gamma", getKGamma(), k}}) {
    if (!gamma)
      continue;
    auto g = cast<RankedTensorType>(gamma.getType());
    if (g.getRank() != 2 || !dimsAgree(g.getDimSize(0), x.getDimSize(1)) ||
        !dimsAgree(g.getDimSize(1), x.getDimSize(2)))
      return emitOpError() << name << " must be [H, d] = ["
                           << dimToString(x.getDimSize(1)) << ", "
                           << dimToString(x.getDimSize(2)) << "], found " << g;
  }
  if (failed(verifyAttentionPrecision(*this, getPrecisionAttr(), getVAmaxAttr(),
                                      q, k, v, getQGamma() && getKGamma())) ||
      failed(verifyAttentionTiles(*this, getTilesAttr())))
    return failure();
  return verifyPositive(*this, "scale", getScaleAttr().getValueAsDouble());
}

LogicalResult SparseCrossAttentionOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseCrossAttentionOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto q = cast<RankedTensorType>(adaptor.getQ().getType());
  auto v = cast<RankedTensorType>(adaptor.getV().getType());
  if (q.getRank() != 3 || v.getRank() != 4)
    return emitOptionalError(location,
                             "sparse.cross_attention needs rank-3 q, rank-4 v");
  ShapeBuilder shape;
  shape.dims(q, 0, 2).dim(v, 3);
  inferredReturnTypes.push_back(shape.get(q.getElementType()));
  return success();
}

LogicalResult SparseCrossAttentionOp::verify() {
  auto q = getQ().getType(), k = getK().getType(), v = getV().getType();
  if (failed(verifyRank(*this, "q", q, 3, "[N, H, d]")) ||
      failed(verifyRank(*this, "k", k, 4, "[B, Lc, H, d]")) ||
      failed(verifyRank(*this, "v", v, 4, "[B, Lc, H, dv]")) ||
      failed(verifySameElementType(*this, "k", k, "q", q)) ||
      failed(verifySameElementType(*this, "v", v, "q", q)) ||
      failed(verifyVoxelDim(*this, "q", q, getCoords().getType().getBound(),
                            "the coordinate set")) ||
      failed(verifyDimsAgree(*this, "batch sizes", "k", k.getDimSize(0), "v",
                             v.getDimSize(0))) ||
      failed(verifyDimsAgree(*this, "context lengths", "k", k.getDimSize(1),
                             "v", v.getDimSize(1))) ||
      failed(verifyDimsAgree(*this, "head counts", "q", q.getDimSize(1), "k",
                             k.getDimSize(2))) ||
      failed(verifyDimsAgree(*this, "head counts", "q", q.getDimSize(1), "v",
                             v.getDimSize(2))) ||
      failed(verifyDimsAgree(*this, "head dims", "q", q.getDimSize(2), "k",
                             k.getDimSize(3))) ||
      failed(verifyAttentionTiles(*this, getTilesAttr())))
    return failure();
  return verifyPositive(*this, "scale", getScaleAttr().getValueAsDouble());
}

LogicalResult SparseUniqueMeanOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    SparseUniqueMeanOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto keys = cast<RankedTensorType>(adaptor.getKeys().getType());
  auto values = cast<RankedTensorType>(adaptor.getValues().getType());
  if (keys.getRank() != 1 || values.getRank() != 2)
    return emitOptionalError(location, "unique_mean needs [M] keys and "
                                       "[M, K] values");
  int64_t bound = getDimUpperBound(keys, 0);
  inferredReturnTypes.push_back(
      ShapeBuilder().dynamic(bound).get(keys.getElementType()));
  inferredReturnTypes.push_back(rowsLike(values, bound));
  return success();
}

LogicalResult SparseUniqueMeanOp::verify() {
  auto keys = getKeys().getType(), values = getValues().getType();
  if (failed(verifyRank(*this, "keys", keys, 1, "[M]")) ||
      failed(verifyRank(*this, "values", values, 2, "[M, K]")) ||
      failed(verifyDimsAgree(*this, "row counts", "keys", keys.getDimSize(0),
                             "values", values.getDimSize(0))))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// Mesh extraction
//===----------------------------------------------------------------------===//

namespace {
/// Channels of the mesh decoder's head (spec §7.4): sdf 8, deform 24,
/// weights 21, colour 48.
constexpr int64_t kFlexiCubesFields = 101;
/// Upper bounds per active cube: 27 candidate cubes (3×3×3 neighbourhood),
/// 4 dual vertices each, and 2 triangles per quad with at most 3 quads per
/// candidate cube (12 edges, each shared by 4 cubes).
constexpr int64_t kVerticesPerCube = 4 * 27;
constexpr int64_t kTrianglesPerCube = 2 * 3 * 27;
} // namespace

LogicalResult
MeshFlexiCubesOp::inferReturnTypes(MLIRContext *context,
                                   std::optional<Location> location,
                                   MeshFlexiCubesOp::Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferredReturnTypes) {
  int64_t n = cast<CoordsType>(adaptor.getCoords().getType()).getBound();
  Type f32 = Float32Type::get(context), i32 = IntegerType::get(context, 32);
  inferredReturnTypes.push_back(
      ShapeBuilder().dynamic(kVerticesPerCube * n).size(3).get(f32));
  inferredReturnTypes.push_back(
      ShapeBuilder().dynamic(kTrianglesPerCube * n).size(3).get(i32));
  inferredReturnTypes.push_back(
      ShapeBuilder().dynamic(kVerticesPerCube * n).size(6).get(f32));
  return success();
}

LogicalResult MeshFlexiCubesOp::verify() {
  auto coords = getCoords().getType();
  auto fields = getFields().getType();
  if (fields.getRank() != 2 || fields.getDimSize(1) != kFlexiCubesFields)
    return emitOpError("fields must be [N, 101] (sdf 8, deform 24, weights "
                       "21, colour 48), found ")
           << fields;
  if (failed(verifyVoxelDim(*this, "fields", fields, coords.getBound(),
                            "the coordinate set")))
    return failure();
  int64_t resolution = getResolutionAttr().getInt();
  if (resolution != coords.getResolution())
    return emitOpError("resolution ")
           << resolution << " differs from the coordinate set's resolution "
           << coords.getResolution();
  if (kVerticesPerCube * coords.getBound() >
      std::numeric_limits<int32_t>::max())
    return emitOpError("coordinate bound ")
           << coords.getBound() << " allows " << kVerticesPerCube
           << " vertices per cube, more than i32 face indices address";
  return success();
}
