//===- FoldZeroConditioning.cpp - Cross-attention of a zero condition -----===//
//
// spec §2.1: the negative condition is all zeros, so every key/value token of
// the unconditional cross-attention is the projection bias, and the
// attention output is one row repeated. The patterns below carry "one row
// repeated" (trellis.broadcast_rows) from the zero constant to where it meets
// a full tensor, leaving one GEMV per block where there was a GEMM and an
// attention per step. The SLat stage's sparse cross-attention has N voxel
// rows (a bounded dynamic dimension): its repeated rows take N from the
// queries at run time (broadcast_rows' `like` operand).
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::trellis {
#define GEN_PASS_DEF_TRELLISFOLDZEROCONDITIONING
#include "dialect/Passes.h.inc"
} // namespace mlir::trellis

using namespace mlir;
using namespace mlir::trellis;

namespace {

/// True if `v` is a zero splat constant, possibly behind casts, reshapes and
/// repeats.
bool isZeroSplat(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (isa<CastOp, ReshapeOp, BroadcastRowsOp>(def)) {
      v = def->getOperand(0);
      continue;
    }
    auto constant = dyn_cast<ConstantOp>(def);
    if (!constant)
      return false;
    auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!dense || !dense.isSplat())
      return false;
    if (isa<FloatType>(dense.getElementType()))
      return dense.getSplatValue<APFloat>().isZero();
    return dense.getSplatValue<APInt>().isZero();
  }
  return false;
}

RankedTensorType staticType(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.hasStaticShape() ? t : RankedTensorType();
}

Location fuse(Operation *a, Operation *b) {
  return FusedLoc::get(a->getContext(), {a->getLoc(), b->getLoc()});
}

/// linear(0, W, b) → b repeated (or zeros without a bias). Exact: the f32
/// accumulation of zeros plus b, rounded, is b.
struct LinearOfZero : OpRewritePattern<LinearOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LinearOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType type = staticType(op.getResult());
    if (!type || type.getRank() < 2 || op.getActivation() || op.getResidual() ||
        !isZeroSplat(op.getInput()))
      return failure();
    Value bias = op.getBias();
    if (!bias) {
      rewriter.replaceOpWithNewOp<ConstantOp>(
          op, type,
          DenseElementsAttr::get(type,
                                 rewriter.getZeroAttr(type.getElementType())));
      return success();
    }
    auto biasType = cast<RankedTensorType>(bias.getType());
    auto rowType = RankedTensorType::get({1, biasType.getDimSize(0)},
                                         biasType.getElementType());
    Value row = ReshapeOp::create(rewriter, op.getLoc(), rowType, bias);
    rewriter.replaceOpWithNewOp<BroadcastRowsOp>(op, type, row);
    return success();
  }
};

/// reshape(rows(r)) that keeps the repeated dimensions → rows(reshape(r)).
struct ReshapeOfRows : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto rows = op.getInput().getDefiningOp<BroadcastRowsOp>();
    auto type = cast<RankedTensorType>(op.getResult().getType());
    if (!rows)
      return failure();
    int64_t lead = rows.getNumLeadingDims();
    ArrayRef<int64_t> in = rows.getResult().getType().getShape();
    // The repeated dimensions are kept and the row is reshaped on its own:
    // same leading sizes (a dynamic one stays dynamic with its bound) and
    // the same number of elements per row.
    if (type.getRank() <= lead ||
        type.getShape().take_front(lead) != in.take_front(lead) ||
        ShapedType::isDynamicShape(type.getShape().drop_front(lead)) ||
        ShapedType::getNumElements(type.getShape().drop_front(lead)) !=
            ShapedType::getNumElements(in.drop_front(lead)))
      return failure();
    SmallVector<int64_t> rowShape{1};
    llvm::append_range(rowShape, type.getShape().drop_front(lead));
    Value row = ReshapeOp::create(
        rewriter, op.getLoc(),
        RankedTensorType::get(rowShape, type.getElementType()), rows.getRow());
    rewriter.replaceOpWithNewOp<BroadcastRowsOp>(op, type, row, rows.getLike())
        ->setLoc(fuse(rows, op));
    return success();
  }
};

/// split(rows(r)) along a row dimension → rows(split(r)).
struct SplitOfRows : OpRewritePattern<SplitOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SplitOp op,
                                PatternRewriter &rewriter) const override {
    auto rows = op.getInput().getDefiningOp<BroadcastRowsOp>();
    if (!rows)
      return failure();
    int64_t rank = rows.getResult().getType().getRank();
    int64_t axis = op.getAxisAttr().getInt();
    if (axis < 0)
      axis += rank;
    int64_t lead = rows.getNumLeadingDims();
    if (axis < lead)
      return failure();
    SmallVector<Type> pieceTypes;
    for (Value r : op.getResults()) {
      auto t = cast<RankedTensorType>(r.getType());
      SmallVector<int64_t> shape{1};
      llvm::append_range(shape, t.getShape().drop_front(lead));
      pieceTypes.push_back(RankedTensorType::get(shape, t.getElementType()));
    }
    auto split =
        SplitOp::create(rewriter, op.getLoc(), pieceTypes, rows.getRow(),
                        axis - lead + 1, op.getSizesAttr());
    SmallVector<Value> replacements;
    for (auto [piece, old] : llvm::zip(split.getResults(), op.getResults()))
      replacements.push_back(BroadcastRowsOp::create(
          rewriter, fuse(rows, op), old.getType(), piece, rows.getLike()));
    rewriter.replaceOp(op, replacements);
    return success();
  }
};

/// attention(q, k, rows(r)) → rows(r) over the queries: the softmax weights of
/// a query sum to one and every value is r. k does not matter. The f32 sum of
/// the weights is 1 within a few ulps, so the f16 output is r but for
/// double-rounding ties.
struct AttentionOfRows : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    auto rows = op.getV().getDefiningOp<BroadcastRowsOp>();
    RankedTensorType type = staticType(op.getResult());
    // Leading dims must cover B and Lk (the rows repeat over the keys).
    if (!rows || !type || rows.getNumLeadingDims() < 2)
      return failure();
    rewriter.replaceOpWithNewOp<BroadcastRowsOp>(op, type, rows.getRow())
        ->setLoc(fuse(rows, op));
    return success();
  }
};

/// sparse.cross_attention(q, k, rows(r), coords) → rows(r) over q's N rows,
/// N taken from q at run time: as for the dense attention, every row's
/// softmax weights over its sample's Lc context tokens sum to one and every
/// value is r.
struct SparseCrossAttentionOfRows : OpRewritePattern<SparseCrossAttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SparseCrossAttentionOp op,
                                PatternRewriter &rewriter) const override {
    auto rows = op.getV().getDefiningOp<BroadcastRowsOp>();
    // Leading dims must cover B and Lc of v [B, Lc, H, dv].
    if (!rows || rows.getNumLeadingDims() < 2)
      return failure();
    auto type = cast<RankedTensorType>(op.getResult().getType());
    Value like = type.hasStaticShape() ? Value() : op.getQ();
    rewriter.replaceOpWithNewOp<BroadcastRowsOp>(op, type, rows.getRow(), like)
        ->setLoc(fuse(rows, op));
    return success();
  }
};

/// linear(rows(r), W, b) → rows(linear(r, W, b)): one GEMV for all rows.
struct LinearOfRows : OpRewritePattern<LinearOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LinearOp op,
                                PatternRewriter &rewriter) const override {
    auto rows = op.getInput().getDefiningOp<BroadcastRowsOp>();
    auto type = cast<RankedTensorType>(op.getResult().getType());
    if (!rows || op.getResidual())
      return failure();
    auto rowType = rows.getRow().getType();
    SmallVector<int64_t> shape(rowType.getShape());
    shape.back() = type.getShape().back();
    auto linear =
        LinearOp::create(rewriter, op.getLoc(),
                         RankedTensorType::get(shape, type.getElementType()),
                         rows.getRow(), op.getWeight(), op.getBias(),
                         /*residual=*/Value(), op.getActivationAttr(),
                         op.getPrecisionAttr(), op.getActivationAmaxAttr());
    rewriter
        .replaceOpWithNewOp<BroadcastRowsOp>(op, type, linear.getResult(),
                                             rows.getLike())
        ->setLoc(fuse(rows, op));
    return success();
  }
};

/// binary(x, rows(r)) → binary(x, r) when x has the result's type: r's
/// leading 1 broadcasts over the repeated dimensions (NumPy rules).
template <typename OpTy> struct BinaryOfRows : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    Type type = op.getResult().getType();
    Value lhs = op.getLhs(), rhs = op.getRhs();
    BroadcastRowsOp rows;
    if ((rows = rhs.getDefiningOp<BroadcastRowsOp>()) && lhs.getType() == type)
      rhs = rows.getRow();
    else if ((rows = lhs.getDefiningOp<BroadcastRowsOp>()) &&
             rhs.getType() == type)
      lhs = rows.getRow();
    else
      return failure();
    // The fused location keeps the origin of what was folded (the
    // attention and its projections).
    rewriter.replaceOpWithNewOp<OpTy>(op, type, lhs, rhs)
        ->setLoc(fuse(op, rows));
    return success();
  }
};

struct FoldZeroConditioningPass
    : trellis::impl::TrellisFoldZeroConditioningBase<FoldZeroConditioningPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<LinearOfZero, ReshapeOfRows, SplitOfRows, AttentionOfRows,
                 SparseCrossAttentionOfRows, LinearOfRows, BinaryOfRows<AddOp>,
                 BinaryOfRows<SubOp>, BinaryOfRows<MulOp>>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
