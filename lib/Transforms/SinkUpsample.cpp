//===- SinkUpsample.cpp - Row-wise work before the 2x upsample ------------===//
//
// trellis-sink-upsample: the SLat flow's upsampling block resamples first and
// then normalizes, activates, convolves and projects the upsampled rows (spec
// §6.2), i.e. it repeats the same per-row work for every child of a coarse
// voxel. A row-wise op commutes with the upsample's row copy, and a
// submanifold conv of copied rows reads, for each neighbour, the row of the
// neighbour's parent; so the work moves to the N' coarse rows and only the
// block's narrow outputs are upsampled.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "dialect/TrellisOpsUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::trellis {
#define GEN_PASS_DEF_TRELLISSINKUPSAMPLE
#include "dialect/Passes.h.inc"
} // namespace mlir::trellis

using namespace mlir;
using namespace mlir::trellis;

namespace {

/// Ops whose result row r depends only on row r of operand 0 (their other
/// operands have no rows): elementwise unary ops, casts, a LayerNorm of the
/// last axis, a linear without residual, and a 1×1×1 sparse conv.
bool isRowWise(Operation *op) {
  if (op->getNumResults() != 1 || op->getNumOperands() == 0 ||
      !isa<RankedTensorType>(op->getResult(0).getType()))
    return false;
  if (isa<CastOp>(op))
    return true;
  if (op->getNumOperands() == 1 && isa<TrellisDialect>(op->getDialect()) &&
      op->hasTrait<mlir::OpTrait::SameOperandsAndResultType>())
    return true;
  if (auto norm = dyn_cast<LayerNormOp>(op)) {
    int64_t axis = norm.getAxisAttr().getInt();
    return axis == -1 || axis == norm.getInput().getType().getRank() - 1;
  }
  if (auto linear = dyn_cast<LinearOp>(op))
    return !linear.getResidual() && linear.getInput().getType().getRank() == 2;
  if (auto conv = dyn_cast<SparseConv3dOp>(op))
    return !conv.getNeighbors();
  return false;
}

/// The type `type` with the rows (dim 0 and its bound) of `rowsOf`.
RankedTensorType withRows(RankedTensorType type, RankedTensorType rowsOf) {
  trellis::detail::ShapeBuilder shape;
  shape.dim(rowsOf, 0).dims(type, 1, type.getRank());
  return shape.get(type.getElementType());
}

/// f(upsample(h)) → upsample(f(h)) for a row-wise f.
struct SinkThroughRowWise : RewritePattern {
  explicit SinkThroughRowWise(MLIRContext *ctx)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!isRowWise(op))
      return failure();
    auto up = op->getOperand(0).getDefiningOp<SparseUpsampleOp>();
    if (!up ||
        llvm::is_contained(op->getOperands().drop_front(), up.getResult()))
      return failure();
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    auto upType = cast<RankedTensorType>(up.getResult().getType());
    // The upsample of the moved op's result must give back `type`.
    if (withRows(type, upType) != type)
      return failure();
    Operation *moved = rewriter.clone(*op);
    moved->setOperand(0, up.getFeats());
    moved->getResult(0).setType(
        withRows(type, cast<RankedTensorType>(up.getFeats().getType())));
    auto sunk =
        SparseUpsampleOp::create(rewriter, up.getLoc(), moved->getResult(0),
                                 up.getCoarse(), up.getFine());
    rewriter.replaceOp(op, sunk.getResult());
    return success();
  }
};

/// conv3d(upsample(h, coarse, fine), W, b, nb)
///   → conv3d(h, W, b, parent_neighbor_map(nb, coarse, fine)).
/// The map is created next to the conv; loop-invariant-code-motion and CSE
/// (after this pass in the fusion pipeline) hoist it out of the sampler and
/// share it between the convs of one coordinate set.
struct ConvOfUpsample : OpRewritePattern<SparseConv3dOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SparseConv3dOp conv,
                                PatternRewriter &rewriter) const override {
    auto up = conv.getFeats().getDefiningOp<SparseUpsampleOp>();
    if (!up || !conv.getNeighbors())
      return failure();
    auto parents = SparseParentNeighborMapOp::create(
        rewriter, up.getLoc(), conv.getNeighbors(), up.getCoarse(),
        up.getFine());
    auto coarseConv = SparseConv3dOp::create(
        rewriter, conv.getLoc(), up.getFeats(), conv.getWeight(),
        conv.getBias(), parents.getResult());
    if (coarseConv.getResult().getType() != conv.getResult().getType()) {
      rewriter.eraseOp(coarseConv);
      rewriter.eraseOp(parents);
      return failure();
    }
    rewriter.replaceOp(conv, coarseConv.getResult());
    return success();
  }
};

struct SinkUpsamplePass
    : trellis::impl::TrellisSinkUpsampleBase<SinkUpsamplePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SinkThroughRowWise, ConvOfUpsample>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
