//===- ChunkMlp.cpp - Token chunks of the MLPs (low-memory mode) ----------===//
//
// The MLP's hidden activation is 4× the width of the residual stream and the
// largest live tensor of a block; running the MLP on token chunks bounds it.
// Rows are independent through linear/gelu/linear, so chunking is exact.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::trellis {
#define GEN_PASS_DEF_TRELLISCHUNKMLP
#include "dialect/Passes.h.inc"
} // namespace mlir::trellis

using namespace mlir;
using namespace mlir::trellis;

namespace {

RankedTensorType withDim(RankedTensorType type, int64_t axis, int64_t size) {
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = size;
  return RankedTensorType::get(shape, type.getElementType());
}

/// linear2(gelu(linear1(x))) or linear2(linear1(x) {gelu_tanh}), rooted at
/// linear2.
struct ChunkMlp : OpRewritePattern<LinearOp> {
  ChunkMlp(MLIRContext *ctx, int64_t chunk)
      : OpRewritePattern(ctx), chunk(chunk) {}

  LogicalResult matchAndRewrite(LinearOp fc2,
                                PatternRewriter &rewriter) const override {
    Value hidden = fc2.getInput();
    GeluOp gelu = hidden.getDefiningOp<GeluOp>();
    if (gelu) {
      if (!gelu->hasOneUse())
        return failure();
      hidden = gelu.getInput();
    }
    auto fc1 = hidden.getDefiningOp<LinearOp>();
    if (!fc1 || !fc1->hasOneUse() || fc2.getActivation() || fc2.getResidual() ||
        (gelu ? bool(fc1.getActivation()) : !fc1.getActivation()))
      return failure();
    auto in = fc1.getInput().getType();
    int64_t axis = in.getRank() - 2;
    if (axis < 0 || !in.hasStaticShape() ||
        !fc2.getResult().getType().hasStaticShape() ||
        in.getDimSize(axis) <= chunk)
      return failure();

    SmallVector<Location> locs{fc1.getLoc()};
    if (gelu)
      locs.push_back(gelu.getLoc());
    locs.push_back(fc2.getLoc());
    Location mlpLoc = FusedLoc::get(getContext(), locs);

    SmallVector<int64_t> sizes;
    for (int64_t left = in.getDimSize(axis); left > 0; left -= chunk)
      sizes.push_back(std::min(left, chunk));
    SmallVector<Type> pieceTypes;
    for (int64_t s : sizes)
      pieceTypes.push_back(withDim(in, axis, s));
    auto split = SplitOp::create(rewriter, mlpLoc, pieceTypes, fc1.getInput(),
                                 axis, rewriter.getDenseI64ArrayAttr(sizes));
    SmallVector<Value> outs;
    for (auto [piece, size] : llvm::zip(split.getResults(), sizes)) {
      Value h = LinearOp::create(rewriter, fc1.getLoc(),
                                 withDim(fc1.getResult().getType(), axis, size),
                                 piece, fc1.getWeight(), fc1.getBias(),
                                 /*residual=*/Value(), fc1.getActivationAttr());
      if (gelu)
        h = GeluOp::create(rewriter, gelu.getLoc(), h.getType(), h);
      outs.push_back(
          LinearOp::create(rewriter, fc2.getLoc(),
                           withDim(fc2.getResult().getType(), axis, size), h,
                           fc2.getWeight(), fc2.getBias()));
    }
    rewriter
        .replaceOpWithNewOp<ConcatOp>(fc2, fc2.getResult().getType(), outs,
                                      axis)
        ->setLoc(mlpLoc);
    return success();
  }

  int64_t chunk;
};

struct ChunkMlpPass : trellis::impl::TrellisChunkMlpBase<ChunkMlpPass> {
  using TrellisChunkMlpBase::TrellisChunkMlpBase;
  void runOnOperation() override {
    if (chunkTokens < 1) {
      getOperation()->emitError("trellis-chunk-mlp: chunk-tokens must be "
                                ">= 1, found ")
          << chunkTokens;
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<ChunkMlp>(&getContext(), chunkTokens);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
