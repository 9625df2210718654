//===- Blocks.h - Building blocks shared by the TRELLIS models --*- C++ -*-===//
//
// The sub-modules several models use (spec §3.6, §6.2, §7.1), traced in the
// module scope the caller opened, with TRELLIS's parameter names.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_MODELS_BLOCKS_H
#define TRELLIS_MODELS_BLOCKS_H

#include "trellis/Trace/Ops.h"

namespace trellis::models {

using trace::Tensor;
using trace::Tracer;

/// Attention geometry of a transformer block.
struct Heads {
  int64_t channels; // C
  int64_t heads;    // H
  int64_t headDim() const { return channels / heads; }
};

/// How a block's tokens are laid out and attend.
/// Dense: tokens [B, L, C]; attention over each sample's L tokens.
/// Sparse: rows [N, C] of `coords`; attention within `segments` (a sample,
/// or a Swin-3D window); per-sample vectors broadcast by batch index.
struct TokenLayout {
  bool sparse = false;
  Tensor coords;   // sparse only
  Tensor segments; // sparse only: self-attention groups
};

/// t_embedder: τ [B] f32 → [B, C] f32 (spec §3.6).
Tensor timestepEmbedder(Tracer &t, const Tensor &tau, int64_t channels);

/// The FFN: Linear(C→hidden) → GELU(tanh) → Linear(hidden→C), names
/// mlp.mlp.{0,2}.* under the current scope.
Tensor feedForward(Tracer &t, const Tensor &x, int64_t channels,
                   int64_t hidden);

/// Self-attention with optional q/k head RMS norm (scope: the attention
/// module, e.g. "self_attn" or "attn").
Tensor selfAttention(Tracer &t, const Tensor &x, const Heads &heads,
                     bool qkRmsNorm, const TokenLayout &layout);

/// Cross-attention to ctx [B, Lc, Cc] (to_q, to_kv, to_out).
Tensor crossAttention(Tracer &t, const Tensor &x, const Tensor &ctx,
                      const Heads &heads, int64_t ctxChannels,
                      const TokenLayout &layout);

/// ModulatedTransformerCrossBlock (dense) /
/// ModulatedSparseTransformerCrossBlock (sparse): adaLN (shift, scale, gate)
/// ×2, unmodulated cross-attention.
Tensor modulatedCrossBlock(Tracer &t, const Tensor &x, const Tensor &emb,
                           const Tensor &ctx, const Heads &heads,
                           int64_t ctxChannels, int64_t mlpHidden,
                           bool qkRmsNorm, const TokenLayout &layout);

/// A LayerNorm32 without affine parameters (TRELLIS's block norms).
Tensor
plainLayerNorm(const Tensor &x, double eps,
               std::source_location where = std::source_location::current());

} // namespace trellis::models

#endif // TRELLIS_MODELS_BLOCKS_H
