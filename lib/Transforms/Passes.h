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
/// `mlpChunkTokens` > 0 (the low-memory mode) adds trellis-chunk-mlp with that
/// many tokens per chunk; `sharePrefix` = false leaves out
/// trellis-share-guidance-prefix (for tests that compare with and without).
void buildFusionPipeline(OpPassManager &pm, int64_t mlpChunkTokens = 0,
                         bool sharePrefix = true);

} // namespace mlir::trellis

#endif // TRELLIS_TRANSFORMS_PASSES_H
