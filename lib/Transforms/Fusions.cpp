//===- Fusions.cpp - Producer/consumer fusions into fused trellis ops -----===//
//
// trellis-fuse-norm-modulate, trellis-fuse-linear-activation,
// trellis-fuse-linear-residual, trellis-fuse-residual-norm,
// trellis-fuse-linear-norm and trellis-form-attention: each merges a
// producer into its consumer
// (docs/design/gpu-backend.md, "Fused ops"), at the fused location of both.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "dialect/TrellisOpsUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::trellis {
#define GEN_PASS_DEF_TRELLISFUSENORMMODULATE
#define GEN_PASS_DEF_TRELLISFUSELINEARACTIVATION
#define GEN_PASS_DEF_TRELLISFUSELINEARRESIDUAL
#define GEN_PASS_DEF_TRELLISFUSERESIDUALNORM
#define GEN_PASS_DEF_TRELLISFUSELINEARNORM
#define GEN_PASS_DEF_TRELLISFORMATTENTION
#include "dialect/Passes.h.inc"
} // namespace mlir::trellis

using namespace mlir;
using namespace mlir::trellis;

namespace {

Location fuse(Operation *a, Operation *b) {
  return FusedLoc::get(a->getContext(), {a->getLoc(), b->getLoc()});
}

/// modulate(layer_norm(x) {last axis, no affine}, shift, scale).
struct NormModulate : OpRewritePattern<ModulateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ModulateOp op,
                                PatternRewriter &rewriter) const override {
    auto norm = op.getInput().getDefiningOp<LayerNormOp>();
    if (!norm || !norm->hasOneUse() || norm.getWeight() || norm.getBias())
      return failure();
    int64_t rank = norm.getInput().getType().getRank();
    int64_t axis = norm.getAxisAttr().getInt();
    if (axis != -1 && axis != rank - 1)
      return failure();
    rewriter
        .replaceOpWithNewOp<LayerNormModulateOp>(
            op, op.getResult().getType(), norm.getInput(), op.getShift(),
            op.getScale(), norm.getEpsAttr())
        ->setLoc(fuse(norm, op));
    return success();
  }
};

/// gelu(linear(...)) with a linear of no activation.
struct LinearGelu : OpRewritePattern<GeluOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GeluOp op,
                                PatternRewriter &rewriter) const override {
    auto linear = op.getInput().getDefiningOp<LinearOp>();
    if (!linear || !linear->hasOneUse() || linear.getActivation())
      return failure();
    rewriter
        .replaceOpWithNewOp<LinearOp>(
            op, op.getResult().getType(), linear.getInput(), linear.getWeight(),
            linear.getBias(), /*residual=*/Value(),
            rewriter.getStringAttr("gelu_tanh"), linear.getPrecisionAttr(),
            linear.getActivationAmaxAttr())
        ->setLoc(fuse(linear, op));
    return success();
  }
};

/// add(x, linear(h, W, b)) (either operand order, no broadcasting) →
/// linear(h, W, b) residual x.
struct LinearResidual : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    Type type = op.getResult().getType();
    if (op.getLhs().getType() != type || op.getRhs().getType() != type)
      return failure();
    for (auto [product, residual] : {std::pair(op.getRhs(), op.getLhs()),
                                     std::pair(op.getLhs(), op.getRhs())}) {
      auto linear = product.getDefiningOp<LinearOp>();
      if (!linear || !linear->hasOneUse() || linear.getActivation() ||
          linear.getResidual() || !linear.getBias())
        continue;
      rewriter
          .replaceOpWithNewOp<LinearOp>(
              op, type, linear.getInput(), linear.getWeight(), linear.getBias(),
              residual, StringAttr(), linear.getPrecisionAttr(),
              linear.getActivationAmaxAttr())
          ->setLoc(fuse(linear, op));
      return success();
    }
    return failure();
  }
};

/// Whether every user of `v` other than `norm` and `except` follows `norm` in
/// its block: a fused op that replaces `v` goes where the norm was.
bool usersFollowNorm(Value v, Operation *norm, Operation *except = nullptr) {
  for (Operation *user : v.getUsers())
    if (user != norm && user != except &&
        (user->getBlock() != norm->getBlock() || !norm->isBeforeInBlock(user)))
      return false;
  return true;
}

/// The norm's operands of a residual-norm op: LayerNorm-modulate's shift and
/// scale, or a last-axis LayerNorm's optional weight and bias (failure for
/// another axis; `rank` is the normalized value's).
struct NormOperands {
  Value shift, scale, weight, bias;
};
template <typename NormOp>
FailureOr<NormOperands> normOperands(NormOp norm, int64_t rank) {
  NormOperands n;
  if constexpr (std::is_same_v<NormOp, LayerNormModulateOp>) {
    n.shift = norm.getShift();
    n.scale = norm.getScale();
  } else {
    int64_t axis = norm.getAxisAttr().getInt();
    if (axis != -1 && axis != rank - 1)
      return failure();
    n.weight = norm.getWeight();
    n.bias = norm.getBias();
  }
  return n;
}

/// norm(gated_residual(x, h, g) [+ plus]) for a LayerNorm-modulate or a
/// last-axis LayerNorm → gated_residual_norm, whose first result replaces
/// the residual's other uses. The fused op goes where the norm was, so every
/// other user of the residual must come after the norm in its block. A
/// LayerNorm of the residual cast to f32 (a flow model's f32 output layer)
/// takes the cast in too (`f32_result`).
template <typename NormOp> struct ResidualNorm : OpRewritePattern<NormOp> {
  using OpRewritePattern<NormOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(NormOp norm,
                                PatternRewriter &rewriter) const override {
    Value residual = norm.getInput();
    CastOp widen;
    if constexpr (std::is_same_v<NormOp, LayerNormOp>) {
      widen = residual.getDefiningOp<CastOp>();
      auto narrow = [](Type t) {
        Type e = getElementTypeOrSelf(t);
        return e.isF16() || e.isBF16();
      };
      if (widen &&
          (!widen->hasOneUse() || !narrow(widen.getInput().getType()) ||
           !getElementTypeOrSelf(widen.getType()).isF32()))
        return failure();
      if (widen)
        residual = widen.getInput();
    }
    auto xType = cast<RankedTensorType>(residual.getType());
    // An added row (the folded unconditional cross-attention, spec §2.1).
    AddOp add = residual.getDefiningOp<AddOp>();
    Value plus;
    GatedResidualOp gated;
    if (add) {
      for (auto [r, p] : {std::pair(add.getLhs(), add.getRhs()),
                          std::pair(add.getRhs(), add.getLhs())}) {
        auto g = r.template getDefiningOp<GatedResidualOp>();
        auto pType = cast<RankedTensorType>(p.getType());
        if (g && g->hasOneUse() &&
            pType.getElementType() == xType.getElementType() &&
            trellis::detail::isPerSampleOf(xType, pType)) {
          gated = g;
          plus = p;
          break;
        }
      }
    } else {
      gated = residual.getDefiningOp<GatedResidualOp>();
    }
    if (!gated || gated.getResult().getType() != xType)
      return failure();
    if (!usersFollowNorm(residual, norm, widen))
      return failure();
    FailureOr<NormOperands> n = normOperands(norm, xType.getRank());
    if (failed(n))
      return failure();
    SmallVector<Location> locs{gated.getLoc()};
    if (add)
      locs.push_back(add.getLoc());
    if (widen)
      locs.push_back(widen.getLoc());
    locs.push_back(norm.getLoc());
    auto fused = GatedResidualNormOp::create(
        rewriter, FusedLoc::get(norm.getContext(), locs), gated.getInput(),
        gated.getH(), gated.getGate(), plus, n->shift, n->scale, n->weight,
        n->bias, norm.getEpsAttr(),
        widen ? rewriter.getUnitAttr() : UnitAttr());
    rewriter.replaceOp(norm, fused.getResult());
    if (widen)
      rewriter.eraseOp(widen);
    if (add) {
      rewriter.replaceOp(add, fused.getResidual());
      rewriter.eraseOp(gated);
    } else {
      rewriter.replaceOp(gated, fused.getResidual());
    }
    return success();
  }
};

/// A linear with a bias, no activation and no residual whose only user is
/// `user`, in `user`'s block (the fused op runs where `user` is: a GEMM
/// hoisted out of a loop stays there).
LinearOp plainLinear(Value h, Operation *user) {
  auto linear = h.getDefiningOp<LinearOp>();
  if (!linear || !linear->hasOneUse() || !linear.getBias() ||
      linear.getActivation() || linear.getResidual() || linear.getPrecision() ||
      linear->getBlock() != user->getBlock())
    return {};
  return linear;
}

/// gated_residual_norm(x, linear(a, W, b), gate, …) (not f32_result) →
/// linear_residual_norm(a, W, b, residual x, gate, …).
struct GatedLinearNorm : OpRewritePattern<GatedResidualNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GatedResidualNormOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getF32Result())
      return failure();
    LinearOp linear = plainLinear(op.getH(), op);
    if (!linear || linear.getResult().getType() != op.getInput().getType())
      return failure();
    auto fused = LinearResidualNormOp::create(
        rewriter, fuse(linear, op), linear.getInput(), linear.getWeight(),
        linear.getBias(), op.getInput(), op.getGate(), op.getPlus(),
        op.getShift(), op.getScale(), op.getWeight(), op.getBias(),
        op.getEpsAttr());
    rewriter.replaceOp(op, fused.getResults());
    rewriter.eraseOp(linear);
    return success();
  }
};

/// norm(linear(a, W, b) residual x) for a LayerNorm-modulate or a last-axis
/// LayerNorm → linear_residual_norm(a, W, b, residual x) (no gate), whose
/// first result replaces the linear's other uses. As in ResidualNorm, the
/// fused op goes where the norm was, so those must follow the norm in its
/// block.
template <typename NormOp>
struct ResidualLinearNorm : OpRewritePattern<NormOp> {
  using OpRewritePattern<NormOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(NormOp norm,
                                PatternRewriter &rewriter) const override {
    Value sum = norm.getInput();
    auto linear = sum.template getDefiningOp<LinearOp>();
    if (!linear || !linear.getResidual() || !linear.getBias() ||
        linear.getActivation() || linear.getPrecision() ||
        linear->getBlock() != norm->getBlock() ||
        llvm::count(norm->getOperands(), sum) != 1)
      return failure();
    if (!usersFollowNorm(sum, norm))
      return failure();
    FailureOr<NormOperands> n =
        normOperands(norm, norm.getInput().getType().getRank());
    if (failed(n))
      return failure();
    auto fused = LinearResidualNormOp::create(
        rewriter, fuse(linear, norm), linear.getInput(), linear.getWeight(),
        linear.getBias(), linear.getResidual(), /*gate=*/Value(),
        /*plus=*/Value(), n->shift, n->scale, n->weight, n->bias,
        norm.getEpsAttr());
    rewriter.replaceOp(norm, fused.getResult());
    rewriter.replaceOp(linear, fused.getResidual());
    return success();
  }
};

/// attention(head_rms_norm(q), head_rms_norm(k), v) (dense, or sparse within
/// segments): the norms become the op's gains.
template <typename Op> struct AttentionNorms : OpRewritePattern<Op> {
  using OpRewritePattern<Op>::OpRewritePattern;
  LogicalResult matchAndRewrite(Op op,
                                PatternRewriter &rewriter) const override {
    auto normOf = [](Value v, Value gamma) {
      auto norm = v.getDefiningOp<HeadRmsNormOp>();
      return !gamma && norm && norm->hasOneUse() ? norm : HeadRmsNormOp();
    };
    HeadRmsNormOp qn = normOf(op.getQ(), op.getQGamma()),
                  kn = normOf(op.getK(), op.getKGamma());
    if (!qn && !kn)
      return failure();
    SmallVector<Location> locs{op.getLoc()};
    for (HeadRmsNormOp n : {qn, kn})
      if (n)
        locs.push_back(n.getLoc());
    Value q = qn ? qn.getInput() : op.getQ();
    Value k = kn ? kn.getInput() : op.getK();
    Value qGamma = qn ? qn.getGamma() : op.getQGamma();
    Value kGamma = kn ? kn.getGamma() : op.getKGamma();
    Location loc = FusedLoc::get(op.getContext(), locs);
    Op fused;
    if constexpr (std::is_same_v<Op, SparseAttentionOp>)
      fused = Op::create(rewriter, loc, op.getResult().getType(), q, k,
                         op.getV(), op.getSegments(), qGamma, kGamma,
                         op.getScaleAttr(), op.getTilesAttr(),
                         op.getPrecisionAttr(), op.getVAmaxAttr());
    else
      fused =
          Op::create(rewriter, loc, op.getResult().getType(), q, k, op.getV(),
                     qGamma, kGamma, op.getScaleAttr(), op.getTilesAttr(),
                     op.getPrecisionAttr(), op.getVAmaxAttr());
    rewriter.replaceOp(op, fused.getResult());
    return success();
  }
};

template <typename... Patterns> LogicalResult applyOne(Operation *root) {
  RewritePatternSet patterns(root->getContext());
  patterns.add<Patterns...>(root->getContext());
  return applyPatternsGreedily(root, std::move(patterns));
}

struct FuseNormModulatePass
    : trellis::impl::TrellisFuseNormModulateBase<FuseNormModulatePass> {
  void runOnOperation() override {
    if (failed(applyOne<NormModulate>(getOperation())))
      signalPassFailure();
  }
};

struct FuseLinearActivationPass
    : trellis::impl::TrellisFuseLinearActivationBase<FuseLinearActivationPass> {
  void runOnOperation() override {
    if (failed(applyOne<LinearGelu>(getOperation())))
      signalPassFailure();
  }
};

struct FuseLinearResidualPass
    : trellis::impl::TrellisFuseLinearResidualBase<FuseLinearResidualPass> {
  void runOnOperation() override {
    if (failed(applyOne<LinearResidual>(getOperation())))
      signalPassFailure();
  }
};

struct FuseResidualNormPass
    : trellis::impl::TrellisFuseResidualNormBase<FuseResidualNormPass> {
  void runOnOperation() override {
    if (failed(applyOne<ResidualNorm<LayerNormModulateOp>,
                        ResidualNorm<LayerNormOp>>(getOperation())))
      signalPassFailure();
  }
};

struct FuseLinearNormPass
    : trellis::impl::TrellisFuseLinearNormBase<FuseLinearNormPass> {
  void runOnOperation() override {
    if (failed(
            applyOne<GatedLinearNorm, ResidualLinearNorm<LayerNormModulateOp>,
                     ResidualLinearNorm<LayerNormOp>>(getOperation())))
      signalPassFailure();
  }
};

struct FormAttentionPass
    : trellis::impl::TrellisFormAttentionBase<FormAttentionPass> {
  void runOnOperation() override {
    if (failed(applyOne<AttentionNorms<AttentionOp>,
                        AttentionNorms<SparseAttentionOp>>(getOperation())))
      signalPassFailure();
  }
};

} // namespace
