//===- ChunkMlp.cpp - Token chunks of the MLPs (low-memory mode) ----------===//
//
// The MLP's hidden activation is 4× the width of the residual stream and the
// largest live tensor of a block; running the MLP on token chunks bounds it.
// Rows are independent through linear/gelu/linear (and the residual fused
// into the second linear), so chunking is exact. Part of the tiling phase.
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
/// linear2 (which may carry a residual).
struct ChunkMlp : OpRewritePattern<LinearOp> {
  ChunkMlp(MLIRContext *ctx, int64_t chunkTokens, int64_t hiddenBytes)
      : OpRewritePattern(ctx), chunkTokens(chunkTokens),
        hiddenBytes(hiddenBytes) {}

  /// Tokens per chunk for a hidden activation of type `hidden` (static).
  int64_t chunkFor(RankedTensorType hidden, int64_t axis) const {
    int64_t chunk = chunkTokens > 0 ? chunkTokens : INT64_MAX;
    if (hiddenBytes > 0) {
      int64_t tokenBytes = hidden.getElementTypeBitWidth() / 8;
      for (int64_t i = 0; i < hidden.getRank(); ++i)
        if (i != axis)
          tokenBytes *= hidden.getDimSize(i);
      chunk = std::min(chunk, std::max<int64_t>(1, hiddenBytes / tokenBytes));
    }
    return chunk;
  }

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
    if (!fc1 || !fc1->hasOneUse() || fc2.getActivation() ||
        (gelu ? bool(fc1.getActivation()) : !fc1.getActivation()))
      return failure();
    auto in = fc1.getInput().getType();
    int64_t axis = in.getRank() - 2;
    if (axis < 0 || !in.hasStaticShape() ||
        !fc1.getResult().getType().hasStaticShape() ||
        !fc2.getResult().getType().hasStaticShape())
      return failure();
    const int64_t chunk = chunkFor(fc1.getResult().getType(), axis);
    if (in.getDimSize(axis) <= chunk)
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
    // The residual (trellis-fuse-linear-residual) in the same chunks.
    SmallVector<Value> residuals(sizes.size());
    if (Value residual = fc2.getResidual()) {
      SmallVector<Type> types;
      for (int64_t s : sizes)
        types.push_back(withDim(fc2.getResult().getType(), axis, s));
      auto pieces = SplitOp::create(rewriter, mlpLoc, types, residual, axis,
                                    rewriter.getDenseI64ArrayAttr(sizes));
      residuals.assign(pieces.getResults().begin(), pieces.getResults().end());
    }
    SmallVector<Value> outs;
    for (auto [piece, size, residual] :
         llvm::zip(split.getResults(), sizes, residuals)) {
      Value h =
          LinearOp::create(rewriter, fc1.getLoc(),
                           withDim(fc1.getResult().getType(), axis, size),
                           piece, fc1.getWeight(), fc1.getBias(),
                           /*residual=*/Value(), fc1.getActivationAttr(),
                           fc1.getPrecisionAttr(), fc1.getActivationAmaxAttr());
      if (gelu)
        h = GeluOp::create(rewriter, gelu.getLoc(), h.getType(), h);
      outs.push_back(LinearOp::create(
          rewriter, fc2.getLoc(),
          withDim(fc2.getResult().getType(), axis, size), h, fc2.getWeight(),
          fc2.getBias(), residual, /*activation=*/StringAttr(),
          fc2.getPrecisionAttr(), fc2.getActivationAmaxAttr()));
    }
    rewriter
        .replaceOpWithNewOp<ConcatOp>(fc2, fc2.getResult().getType(), outs,
                                      axis)
        ->setLoc(mlpLoc);
    return success();
  }

  int64_t chunkTokens, hiddenBytes;
};

struct ChunkMlpPass : trellis::impl::TrellisChunkMlpBase<ChunkMlpPass> {
  using TrellisChunkMlpBase::TrellisChunkMlpBase;
  void runOnOperation() override {
    if (chunkTokens < 0 || hiddenBytes < 0 ||
        (chunkTokens == 0 && hiddenBytes == 0)) {
      getOperation()->emitError("trellis-chunk-mlp: chunk-tokens or "
                                "hidden-bytes must be >= 1 (and neither "
                                "negative), found ")
          << int64_t(chunkTokens) << " and " << int64_t(hiddenBytes);
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<ChunkMlp>(&getContext(), chunkTokens, hiddenBytes);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
