//===- Passes.h - Passes of the trellis dialect -----------------*- C++ -*-===//
#ifndef TRELLIS_TRANSFORMS_PASSES_H
#define TRELLIS_TRANSFORMS_PASSES_H

#include "dialect/TrellisOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::trellis {

#define GEN_PASS_DECL
#include "dialect/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialect/Passes.h.inc"

/// The fusion phase for the CUDA target (docs/design/gpu-backend.md): the
/// two-region sampler with the condition-only work hoisted out of its loop,
/// the zero-conditioning folds, then the producer/consumer fusions, with
/// canonicalize/CSE between them and the location check at the end.
/// `sharePrefix` = false leaves out trellis-share-guidance-prefix (for tests
/// that compare with and without).
void buildFusionPipeline(OpPassManager &pm, bool sharePrefix = true);

/// What the tiling phase decides by (trellisc's options).
struct TilingOptions {
  /// trellis-chunk-mlp: tokens per MLP chunk and bytes of one chunk's hidden
  /// activation at most; both 0 (the default) leaves the MLPs whole.
  int64_t mlpChunkTokens = 0, mlpHiddenBytes = 0;
  /// trellis-tile-attention: the SMs its static choices plan for.
  int64_t multiprocessors = 132;
};

/// The tiling phase for the CUDA target, after fusion: the MLPs' token
/// chunks (when asked for), the attention kernels' tile configurations,
/// the location check.
void buildTilingPipeline(OpPassManager &pm, const TilingOptions &options = {});

} // namespace mlir::trellis

#endif // TRELLIS_TRANSFORMS_PASSES_H
