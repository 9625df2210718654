//===- SLat.cpp - SLat flow and SLat decoder builders ---------------------===//
//
// SLatFlowModel (spec §6) and the Gaussian / radiance-field / mesh decoders
// (spec §7) on sparse voxel tensors: a coordinate set plus features [N, C].
//
//===----------------------------------------------------------------------===//
#include "trellis/Models/Builders.h"

#include "lib/Models/Blocks.h"

#include "dialect/TrellisTypes.h"

namespace trellis::models {

using namespace trace;

namespace {

/// A sparse tensor while tracing: coordinates and features, plus the
/// neighbour map of the coordinates once a conv needed it.
struct Sparse {
  Tensor coords, feats;
  int64_t resolution;
  Tensor nbmap;

  const Tensor &neighbors() {
    if (!nbmap)
      nbmap = neighborMap(coords, 3);
    return nbmap;
  }
};

Tensor sparseConv(Tracer &t, const Tensor &x, int64_t in, int64_t out,
                  Sparse &s) {
  return sparseConv3d(x,
                      t.weight("conv.weight", {out, 3, 3, 3, in}, DType::F16),
                      t.weight("conv.bias", {out}, DType::F16), s.neighbors());
}

/// SparseResBlock3d (spec §6.2): emb modulation (scale, shift — in that
/// order), optional 2× down/upsampling first, skip Linear when widths differ.
/// `up` needs `fine`, the coordinates before the matching downsample.
Sparse sparseResBlock(Tracer &t, Sparse x, const Tensor &emb, int64_t in,
                      int64_t out, int64_t embChannels, bool down, bool up,
                      Sparse *fine) {
  Tensor scale, shift;
  {
    Tracer::Scope s(t, "emb_layers.1");
    Tensor m = linear(silu(emb),
                      t.weight("weight", {2 * out, embChannels}, DType::F16),
                      t.weight("bias", {2 * out}, DType::F16));
    std::vector<Tensor> parts = split(m, 1, {out, out});
    if (parts.size() == 2) {
      scale = parts[0];
      shift = parts[1];
    }
  }
  // Resampling happens first, on the block input.
  if (down) {
    Tensor coarse = coarsen(x.coords, 2);
    x = Sparse{coarse, downsample(x.feats, x.coords, coarse), x.resolution / 2,
               Tensor()};
  } else if (up) {
    x = Sparse{fine->coords, upsample(x.feats, x.coords, fine->coords),
               fine->resolution, fine->nbmap};
  }
  Tensor h;
  {
    Tracer::Scope s(t, "norm1");
    h = layerNorm(x.feats, t.weight("weight", {in}, DType::F32),
                  t.weight("bias", {in}, DType::F32), 1e-6);
  }
  h = silu(h);
  {
    Tracer::Scope s(t, "conv1");
    h = sparseConv(t, h, in, out, x);
  }
  h = modulate(plainLayerNorm(h, 1e-6), batchBroadcast(shift, x.coords),
               batchBroadcast(scale, x.coords));
  h = silu(h);
  {
    Tracer::Scope s(t, "conv2");
    h = sparseConv(t, h, out, out, x);
  }
  Tensor skip = x.feats;
  if (in != out) {
    Tracer::Scope s(t, "skip_connection");
    skip = linear(x.feats, t.weight("weight", {out, in}, DType::F16),
                  t.weight("bias", {out}, DType::F16));
  }
  x.feats = add(h, skip);
  return x;
}

} // namespace

void buildSLatFlow(Tracer &t, const std::string &name,
                   const config::SLatFlowArgs &args, const TraceSizes &sizes) {
  int64_t b = sizes.batch, r = *args.resolution, c = *args.modelChannels;
  int64_t cc = *args.condChannels;
  int64_t bound = voxelBound(r, sizes);
  auto coordsType = mlir::trellis::CoordsType::get(&t.context(), r, bound);
  auto inputs = t.beginFunction(
      name, {coordsType,
             t.tensorType({mlir::ShapedType::kDynamic, *args.inChannels},
                          DType::F32, {bound}),
             t.tensorType({b}, DType::F32),
             t.tensorType({b, sizes.condTokens, cc}, DType::F32)});
  Sparse x{inputs[0], inputs[1], r, Tensor()};
  const Tensor &tau = inputs[2], &cond = inputs[3];

  std::vector<int64_t> io;
  if (args.ioBlockChannels)
    for (const auto &ch : *args.ioBlockChannels)
      io.push_back(*ch);
  int64_t first = io.empty() ? c : io.front();
  {
    Tracer::Scope s(t, "input_layer", args.inChannels.pos);
    x.feats = linear(x.feats,
                     t.weight("weight", {first, *args.inChannels}, DType::F32),
                     t.weight("bias", {first}, DType::F32));
  }
  x.feats = cast(x.feats, DType::F16);
  Tensor emb = cast(timestepEmbedder(t, tau, c), DType::F16);
  Tensor ctx = cast(cond, DType::F16);

  // Input blocks: per io stage, (num_io_res_blocks - 1) plain blocks then one
  // that downsamples into the next width; every output is a skip.
  std::vector<Sparse> skips;
  std::vector<Sparse> fineLevels; // coordinates before each downsample
  int64_t block = 0;
  for (size_t i = 0; i < io.size(); ++i) {
    int64_t ch = io[i], next = i + 1 < io.size() ? io[i + 1] : c;
    for (int64_t j = 0; j + 1 < *args.numIoResBlocks; ++j) {
      Tracer::Scope s(t, "input_blocks." + std::to_string(block++),
                      args.numIoResBlocks.pos);
      x = sparseResBlock(t, x, emb, ch, ch, c, false, false, nullptr);
      skips.push_back(x);
    }
    Tracer::Scope s(t, "input_blocks." + std::to_string(block++),
                    args.ioBlockChannelsPos);
    fineLevels.push_back(x);
    x = sparseResBlock(t, x, emb, ch, next, c, /*down=*/true, false, nullptr);
    skips.push_back(x);
  }

  // APE of the (coarse) coordinates, f32, added in f16 (spec §6.7).
  {
    Tracer::Scope s(t, "", args.peMode.pos);
    x.feats = add(x.feats, cast(ape(xyz(x.coords), c), DType::F16));
  }
  TokenLayout layout{true, x.coords, batchSegments(x.coords)};
  Heads heads{c, *args.numHeads};
  for (int64_t i = 0; i < *args.numBlocks; ++i) {
    Tracer::Scope s(t, "blocks." + std::to_string(i), args.numBlocks.pos);
    x.feats = modulatedCrossBlock(t, x.feats, emb, ctx, heads, cc,
                                  args.mlpHidden(), *args.qkRmsNorm, layout);
  }

  // Output blocks: per io stage in reverse, one upsampling block then
  // plain ones; each input is [h | skip] (h first) when skips are on.
  block = 0;
  bool useSkip = *args.useSkipConnection;
  for (size_t k = 0; k < io.size(); ++k) {
    size_t i = io.size() - 1 - k;
    int64_t ch = io[i], prev = k == 0 ? c : io[i + 1];
    for (int64_t j = 0; j < *args.numIoResBlocks; ++j) {
      Tracer::Scope s(t, "out_blocks." + std::to_string(block++),
                      args.numIoResBlocks.pos);
      Sparse skip = skips.back();
      skips.pop_back();
      int64_t in = j == 0 ? prev : ch;
      if (useSkip) {
        x.feats = concat({x.feats, skip.feats}, 1);
        in *= 2;
      }
      x = sparseResBlock(t, x, emb, in, ch, c, false, /*up=*/j == 0,
                         j == 0 ? &fineLevels[i] : nullptr);
    }
  }
  // The final LN runs on the f16 features; out_layer is f32 (spec §6.1).
  Tensor h = cast(plainLayerNorm(x.feats, 1e-5), DType::F32);
  {
    Tracer::Scope s(t, "out_layer", args.outChannels.pos);
    h = linear(h, t.weight("weight", {*args.outChannels, first}, DType::F32),
               t.weight("bias", {*args.outChannels}, DType::F32));
  }
  t.endFunction({h});
}

//===----------------------------------------------------------------------===//
// Decoders
//===----------------------------------------------------------------------===//

namespace {

/// SparseSubdivideBlock3d (spec §7.4): GroupNorm(32)+SiLU, subdivide, two
/// 3³ convs, and a kernel-1 skip conv (spconv's reinterpreted weight).
Sparse subdivideBlock(Tracer &t, const Sparse &x, int64_t in, int64_t out) {
  Tensor a;
  {
    Tracer::Scope s(t, "act_layers.0");
    a = silu(sparseGroupNorm(x.feats, x.coords,
                             t.weight("weight", {in}, DType::F32),
                             t.weight("bias", {in}, DType::F32), 32, 1e-5));
  }
  Sparse fine{subdivide(x.coords), subdivideFeatures(a), x.resolution * 2,
              Tensor()};
  Tensor skipIn = subdivideFeatures(x.feats);
  Tensor h;
  {
    Tracer::Scope s(t, "out_layers.0");
    h = sparseConv(t, fine.feats, in, out, fine);
  }
  {
    Tracer::Scope s(t, "out_layers.1");
    h = silu(sparseGroupNorm(h, fine.coords,
                             t.weight("weight", {out}, DType::F32),
                             t.weight("bias", {out}, DType::F32), 32, 1e-5));
  }
  {
    Tracer::Scope s(t, "out_layers.3");
    h = sparseConv(t, h, out, out, fine);
  }
  {
    Tracer::Scope s(t, "skip_connection");
    Tensor skip = sparseConv3d(
        skipIn, t.weight("conv.weight", {out, 1, 1, 1, in}, DType::F16),
        t.weight("conv.bias", {out}, DType::F16), Tensor());
    fine.feats = add(h, skip);
  }
  return fine;
}

} // namespace

void buildSLatDecoder(Tracer &t, const std::string &name,
                      const config::SLatDecoderArgs &args,
                      const TraceSizes &sizes) {
  int64_t r = *args.resolution, c = *args.modelChannels;
  int64_t bound = voxelBound(r, sizes);
  auto coordsType = mlir::trellis::CoordsType::get(&t.context(), r, bound);
  auto inputs = t.beginFunction(
      name, {coordsType,
             t.tensorType({mlir::ShapedType::kDynamic, *args.latentChannels},
                          DType::F32, {bound})});
  Sparse x{inputs[0], inputs[1], r, Tensor()};
  {
    Tracer::Scope s(t, "input_layer", args.latentChannels.pos);
    x.feats = linear(x.feats,
                     t.weight("weight", {c, *args.latentChannels}, DType::F32),
                     t.weight("bias", {c}, DType::F32));
  }
  {
    Tracer::Scope s(t, "", args.peMode.pos);
    x.feats = add(x.feats, ape(xyz(x.coords), c)); // f32, then fp16 region
  }
  x.feats = cast(x.feats, DType::F16);

  Heads heads{c, *args.numHeads};
  bool swin = *args.attnMode == config::AttnMode::Swin;
  // The partition depends only on the coordinates and the shift: one value
  // per shift, shared by every block with that shift (spec §7.1.6).
  Tensor windows[2];
  for (int64_t i = 0; i < *args.numBlocks; ++i) {
    Tracer::Scope s(t, "blocks." + std::to_string(i), args.numBlocks.pos);
    Tensor &segments = windows[swin ? i % 2 : 0];
    if (!segments) {
      Tracer::Scope w(t, "", args.windowSize.pos);
      segments = swin ? windowSegments(x.coords, *args.windowSize,
                                       (i % 2) * (*args.windowSize / 2))
                      : batchSegments(x.coords);
    }
    TokenLayout layout{true, x.coords, segments};
    Tensor h;
    {
      Tracer::Scope a(t, "attn");
      h = selfAttention(t, plainLayerNorm(x.feats, 1e-6), heads,
                        *args.qkRmsNorm, layout);
    }
    x.feats = add(x.feats, h);
    h = feedForward(t, plainLayerNorm(x.feats, 1e-6), c, args.mlpHidden());
    x.feats = add(x.feats, h);
  }

  int64_t out = args.outChannels();
  if (args.mesh()) {
    // Two subdivisions to 4× the resolution, then out_layer; no final LN.
    int64_t c1 = c / 4, c2 = c / 8;
    {
      Tracer::Scope s(t, "upsample.0", args.modelChannels.pos);
      x = subdivideBlock(t, x, c, c1);
    }
    {
      Tracer::Scope s(t, "upsample.1", args.modelChannels.pos);
      x = subdivideBlock(t, x, c1, c2);
    }
    Tensor h = cast(x.feats, DType::F32);
    {
      Tracer::Scope s(t, "out_layer", args.representationPos);
      h = linear(h, t.weight("weight", {out, c2}, DType::F32),
                 t.weight("bias", {out}, DType::F32));
    }
    t.endFunction({coordsToTensor(x.coords), h});
    return;
  }
  Tensor h = plainLayerNorm(cast(x.feats, DType::F32), 1e-5);
  {
    Tracer::Scope s(t, "out_layer", args.representationPos);
    h = linear(h, t.weight("weight", {out, c}, DType::F32),
               t.weight("bias", {out}, DType::F32));
  }
  t.endFunction({h});
}

} // namespace trellis::models
