//===- Pipeline.cpp - The TRELLIS pipeline as stage functions -------------===//
//
// Traces the six networks (one function each, named by their pipeline.json
// key) and the stage functions that chain them with the samplers (spec §0.1,
// §3), the SLat de-normalization (§3.5) and the decoder heads (§7.2, §7.3).
//
//===----------------------------------------------------------------------===//
#include "trellis/Models/Builders.h"

#include "trellis/Trace/Ops.h"

namespace trellis::models {

using namespace trace;
using config::ModelRef;

namespace {

trace::SamplerSettings samplerSettings(Tracer &t,
                                       const config::SamplerConfig &sampler,
                                       const config::SamplerOverrides &o,
                                       const std::string &multiImage) {
  trace::SamplerSettings s;
  Result<config::SamplerParams> params =
      config::applyOverrides(sampler.params, o);
  if (!params) {
    Tracer::Scope scope(t, "", sampler.pos);
    t.error(params.message());
    return s;
  }
  s.steps = *params->steps;
  s.rescaleT = *params->rescaleT;
  s.sigmaMin = *sampler.sigmaMin;
  s.cfgStrength = *params->cfgStrength;
  s.cfgIntervalLo = (*params->cfgInterval)[0];
  s.cfgIntervalHi = (*params->cfgInterval)[1];
  switch (sampler.kind) {
  case config::SamplerKind::FlowEulerGuidanceInterval:
    break;
  case config::SamplerKind::FlowEulerCfg: // guidance at every step
    s.cfgIntervalLo = 0.0;
    s.cfgIntervalHi = 1.0;
    break;
  case config::SamplerKind::FlowEuler: // no guidance: (1+0)·v_c − 0·v_u
    s.cfgStrength = 0.0;
    break;
  }
  s.multiImage = multiImage;
  return s;
}

HostTensor vectorOf(const std::vector<config::Located<double>> &values) {
  HostTensor v(DType::F32, {int64_t(values.size())});
  for (size_t i = 0; i < values.size(); ++i)
    v.mutableData<float>()[i] = float(*values[i]);
  return v;
}

Tensor scalar(Tracer &t, float value) {
  HostTensor s(DType::F32, {1});
  s.mutableData<float>()[0] = value;
  return constant(t, s);
}

struct Stages {
  Tracer &t;
  const config::PipelineConfig &p;
  const PipelineOptions &o;
  TraceSizes sizes;
  bool text;

  const ModelRef *ref(std::string_view key) {
    const ModelRef *m = p.model(key);
    return m && m->config ? m : nullptr;
  }

  void enterModel(const ModelRef &m) { t.setModel(m.key, m.config->argsPos); }

  /// neg_cond: zeros for image pipelines (spec §2.1), an input for text.
  Tensor negativeCondition(const std::vector<Tensor> &args, size_t index,
                           int64_t condChannels) {
    if (text)
      return args[index];
    HostTensor zeros(DType::F32, {1, sizes.condTokens, condChannels});
    return constant(t, zeros);
  }

  std::vector<mlir::Type> condTypes(int64_t condChannels) {
    std::vector<mlir::Type> types = {
        t.tensorType({o.images, sizes.condTokens, condChannels}, DType::F32)};
    if (text)
      types.push_back(
          t.tensorType({1, sizes.condTokens, condChannels}, DType::F32));
    return types;
  }

  void ssStage() {
    const ModelRef *flow = ref(config::kSparseStructureFlowKey);
    const ModelRef *dec = ref(config::kSparseStructureDecoderKey);
    if (!flow || !dec)
      return;
    const auto &fa = *flow->config->ssFlow();
    int64_t r = *fa.resolution;
    std::vector<mlir::Type> types = condTypes(*fa.condChannels);
    types.push_back(
        t.tensorType({sizes.batch, *fa.inChannels, r, r, r}, DType::F32));
    auto args = t.beginFunction("ss_stage", types);
    Tensor neg = negativeCondition(args, 1, *fa.condChannels);
    Tracer::Scope scope(t, "", p.sparseStructureSampler.pos);
    t.setModel("sparse_structure_sampler", p.sparseStructureSampler.pos);
    auto settings = samplerSettings(t, p.sparseStructureSampler, o.ssOverrides,
                                    o.multiImage);
    Tensor x =
        flowSample(args.back(), args[0], neg, settings, sizes.batch,
                   [&](const Tensor &x, const Tensor &tau, const Tensor &c) {
                     auto v = call(t, flow->key, {x, tau, c});
                     return v.empty() ? Tensor() : v.front();
                   });
    auto logits = call(t, dec->key, {x});
    Tensor coords = logits.empty() ? Tensor() : occupancy(logits.front());
    t.endFunction({x, coordsToTensor(coords)});
  }

  void slatStage() {
    const ModelRef *flow = ref(config::kSLatFlowKey);
    if (!flow)
      return;
    const auto &fa = *flow->config->slatFlow();
    int64_t r = *fa.resolution, bound = voxelBound(r, sizes);
    std::vector<mlir::Type> types = {
        t.tensorType({mlir::ShapedType::kDynamic, 4}, DType::I32, {bound})};
    for (mlir::Type c : condTypes(*fa.condChannels))
      types.push_back(c);
    types.push_back(t.tensorType({mlir::ShapedType::kDynamic, *fa.inChannels},
                                 DType::F32, {bound}));
    auto args = t.beginFunction("slat_stage", types);
    Tensor neg = negativeCondition(args, 2, *fa.condChannels);
    t.setModel("slat_sampler", p.slatSampler.pos);
    Tensor coords = coordsFromTensor(args[0], r);
    auto settings =
        samplerSettings(t, p.slatSampler, o.slatOverrides, o.multiImage);
    Tensor x =
        flowSample(args.back(), args[1], neg, settings, sizes.batch,
                   [&](const Tensor &x, const Tensor &tau, const Tensor &c) {
                     auto v = call(t, flow->key, {coords, x, tau, c});
                     return v.empty() ? Tensor() : v.front();
                   });
    // De-normalization: feats·std + mean per channel (spec §3.5).
    Tracer::Scope scope(t, "slat_normalization", p.normalizationPos);
    x = add(mul(x, constant(t, vectorOf(p.slatStd))),
            constant(t, vectorOf(p.slatMean)));
    t.endFunction({x});
  }

  /// (coords tensor, slat) -> coordinate set + the decoder's raw output.
  std::vector<Tensor> decoderInputs(const ModelRef &m, const char *name) {
    const auto &da = *m.config->slatDecoder();
    int64_t r = *da.resolution, bound = voxelBound(r, sizes);
    auto args = t.beginFunction(
        name,
        {t.tensorType({mlir::ShapedType::kDynamic, 4}, DType::I32, {bound}),
         t.tensorType({mlir::ShapedType::kDynamic, *da.latentChannels},
                      DType::F32, {bound})});
    enterModel(m);
    Tensor coords = coordsFromTensor(args[0], r);
    return {coords, args[1]};
  }

  /// Gaussians from the head output (spec §7.2): the stored fields.
  void decodeGaussians() {
    const ModelRef *m = ref(config::kGaussianDecoderKey);
    if (!m || !m->config->slatDecoder()->gaussian())
      return;
    const auto &da = *m->config->slatDecoder();
    const auto &rep = *da.gaussian();
    auto in = decoderInputs(*m, "decode_gs");
    auto raw = call(t, m->key, in);
    if (raw.empty())
      return;
    Tracer::Scope scope(t, "", da.representationPos);
    int64_t g = *rep.numGaussians, r = *da.resolution;
    auto parts = split(raw[0], 1, {3 * g, 3 * g, 3 * g, 4 * g, g});
    if (parts.size() != 5)
      return;
    auto scaled = [&](const Tensor &x, double lr) {
      return lr == 1.0 ? x : mul(x, scalar(t, float(lr)));
    };
    const int64_t dyn = mlir::ShapedType::kDynamic;
    Tensor offset = reshape(scaled(parts[0], *rep.lrXyz), {dyn, g, 3});
    if (*rep.perturbOffset)
      offset = add(offset, t.weight("offset_perturbation", {g, 3}, DType::F32));
    offset = mul(tanh(offset), scalar(t, float(0.5 * *rep.voxelSize / r)));
    Tensor centre = div(add(cast(xyz(in[0]), DType::F32), scalar(t, 0.5f)),
                        scalar(t, float(r)));
    Tensor xyzField =
        reshape(add(reshape(centre, {dyn, 1, 3}), offset), {dyn, 3});
    Tensor fdc = reshape(scaled(parts[1], *rep.lrFeaturesDc), {dyn, 1, 3});
    Tensor scaling = reshape(scaled(parts[2], *rep.lrScaling), {dyn, 3});
    Tensor rotation = reshape(scaled(parts[3], *rep.lrRotation), {dyn, 4});
    Tensor opacity = reshape(scaled(parts[4], *rep.lrOpacity), {dyn, 1});
    t.endFunction({xyzField, fdc, scaling, rotation, opacity});
  }

  /// Radiance field (spec §7.3): trivec (+1), density, features_dc.
  void decodeRadianceField() {
    const ModelRef *m = ref(config::kRadianceFieldDecoderKey);
    if (!m || !m->config->slatDecoder()->radianceField())
      return;
    const auto &da = *m->config->slatDecoder();
    const auto &rep = *da.radianceField();
    auto in = decoderInputs(*m, "decode_rf");
    auto raw = call(t, m->key, in);
    if (raw.empty())
      return;
    Tracer::Scope scope(t, "", da.representationPos);
    int64_t rank = *rep.rank, dim = *rep.dim;
    auto parts = split(raw[0], 1, {rank * 3 * dim, rank, rank * 3});
    if (parts.size() != 3)
      return;
    const int64_t dyn = mlir::ShapedType::kDynamic;
    Tensor trivec =
        add(reshape(parts[0], {dyn, rank, 3, dim}), scalar(t, 1.0f));
    Tensor fdc = reshape(parts[2], {dyn, rank, 1, 3});
    t.endFunction({trivec, parts[1], fdc});
  }

  /// image_stage: the normalized images through the image-conditioning
  /// model, whose tokens must be what the flows were compiled to take.
  void imageStage() {
    if (!o.imageCond)
      return;
    const config::ImageCondArgs &a = *o.imageCond;
    t.setModel(kImageCondModelKey, std::nullopt);
    const ModelRef *flow = ref(config::kSparseStructureFlowKey);
    if (flow && *flow->config->ssFlow()->condChannels != *a.hiddenSize) {
      Tracer::Scope scope(t, "", a.hiddenSize.pos);
      t.error("the image-conditioning model gives " +
              std::to_string(*a.hiddenSize) +
              "-channel tokens, the flow models take cond_channels " +
              std::to_string(*flow->config->ssFlow()->condChannels));
      return;
    }
    buildImageCondModel(t, kImageCondModelKey, a, o.images);
    const int64_t s = *a.imageSize;
    auto args = t.beginFunction(
        "image_stage", {t.tensorType({o.images, 3, s, s}, DType::F32)});
    auto cond = call(t, kImageCondModelKey, {args[0]});
    t.endFunction({cond.empty() ? Tensor() : cond.front()});
  }

  /// Mesh decoder: the 101-channel fields at 4× the resolution.
  void decodeMesh() {
    const ModelRef *m = ref(config::kMeshDecoderKey);
    if (!m || !m->config->slatDecoder()->mesh())
      return;
    auto in = decoderInputs(*m, "decode_mesh");
    auto out = call(t, m->key, in);
    if (out.size() != 2)
      return;
    t.endFunction({out[0], out[1]});
  }
};

} // namespace

void buildPipeline(Tracer &t, const config::PipelineConfig &pipeline,
                   const PipelineOptions &options) {
  bool text = pipeline.pipelineClass == config::PipelineClass::TextTo3D;
  // Conditioning tokens: asked for, else the image model's, else the class's.
  int64_t condTokens = options.condTokens;
  if (!condTokens)
    condTokens = options.imageCond ? options.imageCond->tokens()
                                   : (text ? int64_t(77) : int64_t(1374));
  TraceSizes sizes{options.batch, condTokens};
  // The networks, one function per model key.
  for (const ModelRef &m : pipeline.models) {
    if (!m.config)
      continue;
    t.setModel(m.key, m.config->argsPos);
    const config::ModelConfig &mc = *m.config;
    if (auto *a = mc.ssFlow()) {
      buildSparseStructureFlow(t, m.key, *a, sizes);
    } else if (auto *a = mc.ssDecoder()) {
      const ModelRef *flow = pipeline.model(config::kSparseStructureFlowKey);
      int64_t latentRes = flow && flow->config && flow->config->ssFlow()
                              ? *flow->config->ssFlow()->resolution
                              : 16;
      buildSparseStructureDecoder(t, m.key, *a, latentRes, sizes);
    } else if (auto *a = mc.slatFlow()) {
      buildSLatFlow(t, m.key, *a, sizes);
    } else if (auto *a = mc.slatDecoder()) {
      buildSLatDecoder(t, m.key, *a, sizes);
    }
  }
  Stages stages{t, pipeline, options, sizes, text};
  stages.imageStage();
  stages.ssStage();
  stages.slatStage();
  stages.decodeGaussians();
  stages.decodeRadianceField();
  stages.decodeMesh();
}

} // namespace trellis::models
