//===- Blocks.cpp - Building blocks shared by the TRELLIS models ----------===//
#include "lib/Models/Blocks.h"

#include <cmath>
#include <optional>

namespace trellis::models {

using namespace trace;

Tensor plainLayerNorm(const Tensor &x, double eps, std::source_location where) {
  return layerNorm(x, Tensor(), Tensor(), eps, -1, where);
}

Tensor timestepEmbedder(Tracer &t, const Tensor &tau, int64_t channels) {
  Tracer::Scope scope(t, "t_embedder");
  // Frequencies and [cos, sin] are the op's; the MLP is f32 (spec §11).
  Tensor e = timestepEmbedding(tau, 256, 10000.0);
  Tensor h = linear(e, t.weight("mlp.0.weight", {channels, 256}, DType::F32),
                    t.weight("mlp.0.bias", {channels}, DType::F32));
  h = silu(h);
  return linear(h, t.weight("mlp.2.weight", {channels, channels}, DType::F32),
                t.weight("mlp.2.bias", {channels}, DType::F32));
}

Tensor feedForward(Tracer &t, const Tensor &x, int64_t channels,
                   int64_t hidden) {
  Tracer::Scope scope(t, "mlp");
  Tensor h = linear(x, t.weight("mlp.0.weight", {hidden, channels}, DType::F16),
                    t.weight("mlp.0.bias", {hidden}, DType::F16));
  h = gelu(h);
  return linear(h, t.weight("mlp.2.weight", {channels, hidden}, DType::F16),
                t.weight("mlp.2.bias", {channels}, DType::F16));
}

/// The token dimensions in front of the channels: [B, L] or [N].
static Shape tokenDims(const Tensor &x) {
  Shape dims(x.shape().begin(), x.shape().end());
  dims.pop_back();
  return dims;
}

static Shape concatShape(Shape a, std::initializer_list<int64_t> b) {
  a.insert(a.end(), b);
  return a;
}

/// [..., parts·H·d] → `parts` tensors [..., H, d] (head-major channels).
static std::vector<Tensor> splitHeads(const Tensor &x, int64_t parts,
                                      const Heads &heads) {
  Shape tokens = tokenDims(x);
  int64_t axis = int64_t(tokens.size());
  Tensor r =
      reshape(x, concatShape(tokens, {parts, heads.heads, heads.headDim()}));
  std::vector<Tensor> out;
  for (const Tensor &p : split(r, axis, std::vector<int64_t>(parts, 1)))
    out.push_back(
        reshape(p, concatShape(tokens, {heads.heads, heads.headDim()})));
  return out;
}

/// [..., H, d] → [..., H·d].
static Tensor mergeHeads(const Tensor &x, const Heads &heads) {
  Shape dims(x.shape().begin(), x.shape().end());
  dims.resize(dims.size() - 2);
  dims.push_back(heads.channels);
  return reshape(x, dims);
}

Tensor selfAttention(Tracer &t, const Tensor &x, const Heads &heads,
                     bool qkRmsNorm, const TokenLayout &layout) {
  int64_t c = heads.channels;
  Tensor qkv = linear(x, t.weight("to_qkv.weight", {3 * c, c}, DType::F16),
                      t.weight("to_qkv.bias", {3 * c}, DType::F16));
  std::vector<Tensor> parts = splitHeads(qkv, 3, heads);
  Tensor q = parts[0], k = parts[1], v = parts[2];
  // With head-normalized q and k (whose logits are bounded) the attention
  // runs in FP8 under --precision=fp8 (the flow transformers' blocks, head
  // dim 64); otherwise the norms are ops of their own.
  std::optional<HeadNorms> norms;
  if (qkRmsNorm) {
    Shape gammaShape = {heads.heads, heads.headDim()};
    norms = HeadNorms{t.weight("q_rms_norm.gamma", gammaShape, DType::F32),
                      t.weight("k_rms_norm.gamma", gammaShape, DType::F32)};
  }
  double scale = 1.0 / std::sqrt(double(heads.headDim()));
  const HeadNorms *n = norms ? &*norms : nullptr;
  Tensor o = layout.sparse ? sparseAttention(q, k, v, layout.segments, scale, n)
                           : attention(q, k, v, scale, n);
  return linear(mergeHeads(o, heads),
                t.weight("to_out.weight", {c, c}, DType::F16),
                t.weight("to_out.bias", {c}, DType::F16));
}

Tensor crossAttention(Tracer &t, const Tensor &x, const Tensor &ctx,
                      const Heads &heads, int64_t ctxChannels,
                      const TokenLayout &layout) {
  int64_t c = heads.channels;
  Tensor q = linear(x, t.weight("to_q.weight", {c, c}, DType::F16),
                    t.weight("to_q.bias", {c}, DType::F16));
  q = splitHeads(q, 1, heads)[0];
  Tensor kv =
      linear(ctx, t.weight("to_kv.weight", {2 * c, ctxChannels}, DType::F16),
             t.weight("to_kv.bias", {2 * c}, DType::F16));
  std::vector<Tensor> parts = splitHeads(kv, 2, heads);
  double scale = 1.0 / std::sqrt(double(heads.headDim()));
  Tensor o = layout.sparse ? sparseCrossAttention(q, parts[0], parts[1],
                                                  layout.coords, scale)
                           : attention(q, parts[0], parts[1], scale);
  return linear(mergeHeads(o, heads),
                t.weight("to_out.weight", {c, c}, DType::F16),
                t.weight("to_out.bias", {c}, DType::F16));
}

Tensor modulatedCrossBlock(Tracer &t, const Tensor &x, const Tensor &emb,
                           const Tensor &ctx, const Heads &heads,
                           int64_t ctxChannels, int64_t mlpHidden,
                           bool qkRmsNorm, const TokenLayout &layout) {
  int64_t c = heads.channels;
  // --precision=fp8 quantizes every linear of the block: the attention and
  // MLP ones for speed, the adaLN modulation (one row, 6c x c: a quarter of
  // the block's weights) for the weights' memory; and the self-attention
  // itself (its q and k are head-RMS-normalized), not the cross-attention.
  Tracer::QuantizeFp8 fp8(t);
  std::vector<Tensor> mod;
  {
    Tracer::Scope scope(t, "adaLN_modulation.1");
    Tensor m = linear(silu(emb), t.weight("weight", {6 * c, c}, DType::F16),
                      t.weight("bias", {6 * c}, DType::F16));
    // Chunk order: shift, scale, gate (msa), shift, scale, gate (mlp).
    mod = split(m, 1, std::vector<int64_t>(6, c));
    if (layout.sparse) // per-sample [B, C] → the rows of each sample
      for (Tensor &v : mod)
        v = batchBroadcast(v, layout.coords);
  }
  if (mod.size() != 6)
    return Tensor();
  const Tensor &shiftMsa = mod[0], &scaleMsa = mod[1], &gateMsa = mod[2],
               &shiftMlp = mod[3], &scaleMlp = mod[4], &gateMlp = mod[5];

  Tensor h = modulate(plainLayerNorm(x, 1e-6), shiftMsa, scaleMsa);
  {
    Tracer::Scope scope(t, "self_attn");
    h = selfAttention(t, h, heads, qkRmsNorm, layout);
  }
  Tensor y = gatedResidual(x, h, gateMsa);
  {
    // norm2 is the only affine LayerNorm of the block; the cross-attention
    // is neither modulated nor gated (spec §12.6).
    Tracer::Scope norm(t, "norm2");
    h = layerNorm(y, t.weight("weight", {c}, DType::F32),
                  t.weight("bias", {c}, DType::F32), 1e-6);
  }
  {
    Tracer::Scope scope(t, "cross_attn");
    h = crossAttention(t, h, ctx, heads, ctxChannels, layout);
  }
  y = add(y, h);
  h = modulate(plainLayerNorm(y, 1e-6), shiftMlp, scaleMlp);
  h = feedForward(t, h, c, mlpHidden);
  return gatedResidual(y, h, gateMlp);
}

} // namespace trellis::models
