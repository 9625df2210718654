//===- SparseStructure.cpp - SS flow and SS decoder builders --------------===//
//
// SparseStructureFlowModel (spec §4) and SparseStructureDecoder (spec §5).
//
//===----------------------------------------------------------------------===//
#include "trellis/Models/Builders.h"

#include "lib/Models/Blocks.h"

namespace trellis::models {

using namespace trace;

/// [B, C, R, R, R] → tokens [B, (R/p)³, C·p³] (spec §4.1 patchify).
static Tensor patchify(const Tensor &x, int64_t p) {
  int64_t b = x.dim(0), c = x.dim(1), r = x.dim(2), g = r / p;
  if (p == 1)
    return permute(reshape(x, {b, c, g * g * g}), {0, 2, 1});
  Tensor y = reshape(x, {b, c, g, p, g, p, g, p});
  y = permute(y, {0, 2, 4, 6, 1, 3, 5, 7});
  return reshape(y, {b, g * g * g, c * p * p * p});
}

/// The inverse of patchify.
static Tensor unpatchify(const Tensor &h, int64_t c, int64_t r, int64_t p) {
  int64_t b = h.dim(0), g = r / p;
  if (p == 1)
    return reshape(permute(h, {0, 2, 1}), {b, c, r, r, r});
  Tensor y = reshape(h, {b, g, g, g, c, p, p, p});
  y = permute(y, {0, 4, 1, 5, 2, 6, 3, 7});
  return reshape(y, {b, c, r, r, r});
}

void buildSparseStructureFlow(Tracer &t, const std::string &name,
                              const config::SparseStructureFlowArgs &args,
                              const TraceSizes &sizes) {
  int64_t b = sizes.batch, r = *args.resolution, p = *args.patchSize;
  int64_t c = *args.modelChannels, cc = *args.condChannels;
  int64_t tokens = args.numTokens();
  auto inputs = t.beginFunction(
      name, {t.tensorType({b, *args.inChannels, r, r, r}, DType::F32),
             t.tensorType({b}, DType::F32),
             t.tensorType({b, sizes.condTokens, cc}, DType::F32)});
  const Tensor &x = inputs[0], &tau = inputs[1], &cond = inputs[2];

  Tensor h = patchify(x, p);
  {
    Tracer::Scope scope(t, "input_layer", args.inChannels.pos);
    int64_t in = *args.inChannels * p * p * p;
    h = linear(h, t.weight("weight", {c, in}, DType::F32),
               t.weight("bias", {c}, DType::F32));
  }
  {
    // The APE of the token grid, stored in the checkpoint (spec §12.9).
    Tracer::Scope scope(t, "", args.peMode.pos);
    h = add(h, t.weight("pos_emb", {tokens, c}, DType::F32));
  }
  Tensor emb = timestepEmbedder(t, tau, c);

  // fp16 region: the blocks (spec §11).
  h = cast(h, DType::F16);
  emb = cast(emb, DType::F16);
  Tensor ctx = cast(cond, DType::F16);
  Heads heads{c, *args.numHeads};
  for (int64_t i = 0; i < *args.numBlocks; ++i) {
    Tracer::Scope scope(t, "blocks." + std::to_string(i), args.numBlocks.pos);
    h = modulatedCrossBlock(t, h, emb, ctx, heads, cc, args.mlpHidden(),
                            *args.qkRmsNorm, TokenLayout{});
  }
  h = plainLayerNorm(cast(h, DType::F32), 1e-5); // final LN: eps 1e-5
  int64_t out = *args.outChannels * p * p * p;
  {
    Tracer::Scope scope(t, "out_layer", args.outChannels.pos);
    h = linear(h, t.weight("weight", {out, c}, DType::F32),
               t.weight("bias", {out}, DType::F32));
  }
  t.endFunction({unpatchify(h, *args.outChannels, r, p)});
}

/// ChannelLayerNorm32: LayerNorm over the channel axis of NCDHW, affine,
/// eps 1e-5 (spec §5.1; not GroupNorm, spec §12.2).
static Tensor channelLayerNorm(Tracer &t, const Tensor &x, int64_t channels) {
  return layerNorm(x, t.weight("weight", {channels}, DType::F32),
                   t.weight("bias", {channels}, DType::F32), 1e-5, /*axis=*/1);
}

static Tensor conv(Tracer &t, const Tensor &x, int64_t in, int64_t out,
                   DType dtype) {
  return conv3d(x, t.weight("weight", {out, in, 3, 3, 3}, dtype),
                t.weight("bias", {out}, dtype), 1);
}

/// ResBlock3d(c): conv2(silu(norm2(conv1(silu(norm1(x)))))) + x.
static Tensor resBlock3d(Tracer &t, const Tensor &x, int64_t c) {
  Tensor h;
  {
    Tracer::Scope s(t, "norm1");
    h = silu(channelLayerNorm(t, x, c));
  }
  {
    Tracer::Scope s(t, "conv1");
    h = conv(t, h, c, c, DType::F16);
  }
  {
    Tracer::Scope s(t, "norm2");
    h = silu(channelLayerNorm(t, h, c));
  }
  {
    Tracer::Scope s(t, "conv2");
    h = conv(t, h, c, c, DType::F16);
  }
  return add(h, x);
}

void buildSparseStructureDecoder(Tracer &t, const std::string &name,
                                 const config::SparseStructureDecoderArgs &args,
                                 int64_t r, const TraceSizes &sizes) {
  int64_t b = sizes.batch;
  auto inputs = t.beginFunction(
      name, {t.tensorType({b, *args.latentChannels, r, r, r}, DType::F32)});
  if (*args.normType != config::NormType::Layer) {
    // The dialect has no dense GroupNorm; TRELLIS's released decoder uses
    // the default "layer" (spec §5.1).
    Tracer::Scope s(t, "", args.normType.pos);
    t.error("norm_type \"group\" is not supported by trellisc (the released "
            "decoder uses the default \"layer\")");
    return;
  }
  const auto &chs = args.channels;
  Tensor h;
  {
    Tracer::Scope s(t, "input_layer", args.latentChannels.pos);
    h = conv(t, inputs[0], *args.latentChannels, *chs[0], DType::F32);
  }
  h = cast(h, DType::F16);
  for (int64_t i = 0; i < *args.numResBlocksMiddle; ++i) {
    Tracer::Scope s(t, "middle_block." + std::to_string(i),
                    args.numResBlocksMiddle.pos);
    h = resBlock3d(t, h, *chs[0]);
  }
  int64_t block = 0;
  for (size_t stage = 0; stage < chs.size(); ++stage) {
    int64_t c = *chs[stage];
    for (int64_t j = 0; j < *args.numResBlocks; ++j) {
      Tracer::Scope s(t, "blocks." + std::to_string(block++),
                      args.numResBlocks.pos);
      h = resBlock3d(t, h, c);
    }
    if (stage + 1 < chs.size()) {
      // Upsample: conv to 8·c_next channels, then PixelShuffle3D(2).
      int64_t next = *chs[stage + 1];
      Tracer::Scope s(t, "blocks." + std::to_string(block++), chs[stage].pos);
      Tracer::Scope sc(t, "conv");
      h = pixelShuffle3d(conv(t, h, c, 8 * next, DType::F16), 2);
    }
  }
  h = cast(h, DType::F32);
  int64_t last = *chs.back();
  {
    Tracer::Scope s(t, "out_layer.0", chs.back().pos);
    h = silu(channelLayerNorm(t, h, last));
  }
  {
    Tracer::Scope s(t, "out_layer.2", args.outChannels.pos);
    h = conv(t, h, last, *args.outChannels, DType::F32);
  }
  t.endFunction({h});
}

int64_t voxelBound(int64_t resolution, const TraceSizes &sizes) {
  return sizes.batch * resolution * resolution * resolution;
}

} // namespace trellis::models
