//===- ModelConfig.cpp - Checkpoint sidecars (ckpts/<name>.json) ----------===//
//
// Mirrors the constructors of the TRELLIS model classes (spec §4–§7):
// defaults, the values each constructor derives (num_heads from
// num_head_channels, the decoders' output channels) and the assertions they
// make, plus the limits of what trellisc compiles.
//
//===----------------------------------------------------------------------===//

#include "trellis/Config/ModelConfig.h"

#include "lib/Config/Reader.h"

#include <cmath>

namespace trellis::config {

using namespace detail;

std::string_view modelKindDescription(ModelKind kind) {
  switch (kind) {
  case ModelKind::SparseStructureFlow:
    return "sparse structure flow model";
  case ModelKind::SparseStructureDecoder:
    return "sparse structure decoder";
  case ModelKind::SLatFlow:
    return "structured latent flow model";
  case ModelKind::SLatGaussianDecoder:
    return "Gaussian decoder";
  case ModelKind::SLatRadianceFieldDecoder:
    return "radiance field decoder";
  case ModelKind::SLatMeshDecoder:
    return "mesh decoder";
  }
  return "model";
}

namespace {
struct ClassName {
  std::string_view name;
  ModelKind kind;
  bool elastic;
};
constexpr ClassName kClasses[] = {
    {"SparseStructureFlowModel", ModelKind::SparseStructureFlow, false},
    {"SparseStructureDecoder", ModelKind::SparseStructureDecoder, false},
    {"SLatFlowModel", ModelKind::SLatFlow, false},
    {"ElasticSLatFlowModel", ModelKind::SLatFlow, true},
    {"SLatGaussianDecoder", ModelKind::SLatGaussianDecoder, false},
    {"ElasticSLatGaussianDecoder", ModelKind::SLatGaussianDecoder, true},
    {"SLatRadianceFieldDecoder", ModelKind::SLatRadianceFieldDecoder, false},
    {"ElasticSLatRadianceFieldDecoder", ModelKind::SLatRadianceFieldDecoder,
     true},
    {"SLatMeshDecoder", ModelKind::SLatMeshDecoder, false},
    {"ElasticSLatMeshDecoder", ModelKind::SLatMeshDecoder, true},
};
} // namespace

std::optional<ModelClassInfo> parseModelClassName(std::string_view name) {
  for (const ClassName &c : kClasses)
    if (c.name == name)
      return ModelClassInfo{c.kind, c.elastic};
  return std::nullopt;
}

int64_t FlowCommonArgs::mlpHidden() const {
  return int64_t(double(*modelChannels) * *mlpRatio);
}

int64_t SparseStructureFlowArgs::numTokens() const {
  int64_t side = *resolution / *patchSize;
  return side * side * side;
}

int64_t
SparseStructureDecoderArgs::outputResolution(int64_t latentResolution) const {
  int64_t r = latentResolution;
  for (size_t i = 1; i < channels.size(); ++i)
    r *= 2;
  return r;
}

int64_t SLatDecoderArgs::mlpHidden() const {
  return int64_t(double(*modelChannels) * *mlpRatio);
}

int64_t SLatDecoderArgs::outChannels() const {
  if (const GaussianRepresentation *g = gaussian())
    return 14 * *g->numGaussians; // xyz 3 + dc 3 + scaling 3 + rot 4 + op 1
  if (const RadianceFieldRepresentation *r = radianceField())
    return *r->rank * 3 * *r->dim + *r->rank + *r->rank * 3;
  const MeshRepresentation *m = mesh();
  return 8 + 24 + 21 + (*m->useColor ? 48 : 0);
}

namespace {

constexpr int64_t kMaxMlpHidden = kMaxChannels * 16;

/// num_heads (null or absent: model_channels // num_head_channels) and
/// num_head_channels, then the divisibility every attention asserts.
void parseHeads(ObjectReader &r, const Located<int64_t> &modelChannels,
                Located<int64_t> &numHeads, Located<int64_t> &numHeadChannels) {
  numHeadChannels =
      r.integer("num_head_channels", positiveInt(kMaxChannels), 64);
  const JsonValue *v = r.take("num_heads");
  if (!v || v->isNull()) {
    numHeads.pos = v ? posOf(r.file(), *v, r.pathOf("num_heads"))
                     : r.absentPos("num_heads");
    numHeads.defaulted = true;
    numHeads.value = *modelChannels / *numHeadChannels;
    if (r.good({"model_channels", "num_head_channels"}) && *numHeads == 0) {
      r.diags().error(numHeadChannels.pos,
                      "expected at most model_channels " +
                          std::to_string(*modelChannels) + " (" +
                          modelChannels.pos.location() +
                          ") so that num_heads = model_channels // "
                          "num_head_channels is positive, found " +
                          std::to_string(*numHeadChannels));
      r.markBad("num_heads");
    }
  } else {
    numHeads.pos = posOf(r.file(), *v, r.pathOf("num_heads"));
    numHeads.defaulted = false;
    if (std::optional<int64_t> h =
            checkInt(r.diags(), numHeads.pos, *v,
                     {1, kMaxChannels, "a positive integer (or null)"}))
      numHeads.value = *h;
    else {
      numHeads.value = 1;
      r.markBad("num_heads");
    }
  }
  if (r.good({"model_channels", "num_heads", "num_head_channels"}) &&
      *modelChannels % *numHeads != 0) {
    r.diags().error(numHeads.pos,
                    "expected a divisor of model_channels " +
                        std::to_string(*modelChannels) + " (" +
                        modelChannels.pos.location() +
                        "): every head gets model_channels / num_heads "
                        "channels, found " +
                        std::to_string(*numHeads));
    r.markBad("num_heads");
  }
}

Located<double> parseMlpRatio(ObjectReader &r,
                              const Located<int64_t> &modelChannels) {
  Located<double> ratio = r.number("mlp_ratio", positiveNumber(), 4.0);
  if (r.good({"mlp_ratio", "model_channels"})) {
    double hidden = std::floor(double(*modelChannels) * *ratio);
    if (hidden < 1 || hidden > double(kMaxMlpHidden)) {
      r.diags().error(
          ratio.pos,
          "expected a ratio giving an MLP width int(" +
              std::to_string(*modelChannels) + " * mlp_ratio) between 1 and " +
              std::to_string(kMaxMlpHidden) + ", found " +
              (ratio.defaulted ? std::string("4")
                               : r.json().find("mlp_ratio")->describe()));
      r.markBad("mlp_ratio");
    }
  }
  return ratio;
}

Located<PeMode> parsePeMode(ObjectReader &r) {
  return r.enumeration<PeMode>(
      "pe_mode", {{"ape", PeMode::Ape}}, PeMode::Ape,
      {{"rope", "rotary position embeddings are a TRELLIS option that "
                "trellisc does not compile; every released checkpoint uses "
                "\"ape\""}});
}

void parseFlowCommon(ObjectReader &r, FlowCommonArgs &a) {
  a.resolution =
      r.integer("resolution", positiveInt(kMaxResolution), std::nullopt);
  a.inChannels =
      r.integer("in_channels", positiveInt(kMaxChannels), std::nullopt);
  a.modelChannels =
      r.integer("model_channels", positiveInt(kMaxChannels), std::nullopt);
  a.condChannels =
      r.integer("cond_channels", positiveInt(kMaxChannels), std::nullopt);
  a.outChannels =
      r.integer("out_channels", positiveInt(kMaxChannels), std::nullopt);
  a.numBlocks = r.integer("num_blocks", positiveInt(kMaxBlocks), std::nullopt);
  parseHeads(r, a.modelChannels, a.numHeads, a.numHeadChannels);
  a.mlpRatio = parseMlpRatio(r, a.modelChannels);
  a.patchSize = r.integer("patch_size", positiveInt(64), 2);
  a.peMode = parsePeMode(r);
  a.useFp16 = r.boolean("use_fp16", false);
  a.useCheckpoint = r.boolean("use_checkpoint", false);
  a.shareMod = r.boolean("share_mod", false);
  a.qkRmsNorm = r.boolean("qk_rms_norm", false);
  a.qkRmsNormCross = r.boolean("qk_rms_norm_cross", false);
}

SparseStructureFlowArgs parseSSFlow(ObjectReader &r) {
  SparseStructureFlowArgs a;
  parseFlowCommon(r, a);
  if (r.good({"resolution", "patch_size"}) &&
      *a.resolution % *a.patchSize != 0) {
    r.diags().error(a.patchSize.pos,
                    "expected a divisor of resolution " +
                        std::to_string(*a.resolution) + " (" +
                        a.resolution.pos.location() +
                        "): patchify splits each axis into patches, found " +
                        std::to_string(*a.patchSize));
    r.markBad("patch_size");
  }
  return a;
}

/// An array of positive integers (channel lists).
std::optional<std::vector<Located<int64_t>>>
parseChannelList(ObjectReader &r, std::string_view key, const JsonValue &v,
                 SourcePos &listPos) {
  listPos = posOf(r.file(), v, r.pathOf(key));
  if (!v.isArray() || v.size() == 0 || v.size() > 16) {
    r.diags().error(listPos,
                    "expected a non-empty array of at most 16 positive "
                    "integers, found " +
                        v.describe());
    r.markBad(key);
    return std::nullopt;
  }
  std::vector<Located<int64_t>> out;
  bool ok = true;
  for (size_t i = 0; i < v.size(); ++i) {
    Located<int64_t> c;
    c.pos = posOf(r.file(), v[i], jsonPathIndex(listPos.path, i));
    if (std::optional<int64_t> x =
            checkInt(r.diags(), c.pos, v[i], positiveInt(kMaxChannels)))
      c.value = *x;
    else
      ok = false;
    out.push_back(c);
  }
  if (!ok) {
    r.markBad(key);
    return std::nullopt;
  }
  return out;
}

SLatFlowArgs parseSLatFlow(ObjectReader &r) {
  SLatFlowArgs a;
  parseFlowCommon(r, a);
  a.numIoResBlocks = r.integer("num_io_res_blocks", positiveInt(64), 2);
  const JsonValue *io = r.take("io_block_channels");
  if (!io || io->isNull()) {
    a.ioBlockChannelsPos =
        io ? posOf(r.file(), *io, r.pathOf("io_block_channels"))
           : r.absentPos("io_block_channels");
  } else {
    a.ioBlockChannels =
        parseChannelList(r, "io_block_channels", *io, a.ioBlockChannelsPos);
  }
  a.useSkipConnection = r.boolean("use_skip_connection", true);
  if (a.ioBlockChannels && r.good({"patch_size"})) {
    int64_t p = *a.patchSize;
    if ((p & (p - 1)) != 0) {
      r.diags().error(a.patchSize.pos,
                      "expected a power of two (each io_block_channels "
                      "stage halves the resolution), found " +
                          std::to_string(p));
    } else {
      size_t stages = 0;
      while ((int64_t(1) << stages) < p)
        ++stages;
      if (stages != a.ioBlockChannels->size())
        r.diags().error(a.ioBlockChannelsPos,
                        "expected " + std::to_string(stages) +
                            (stages == 1 ? " entry" : " entries") +
                            " (one per 2x downsample: log2 of patch_size " +
                            std::to_string(p) + " at " +
                            a.patchSize.pos.location() + "), found " +
                            std::to_string(a.ioBlockChannels->size()));
    }
  }
  return a;
}

SparseStructureDecoderArgs parseSSDecoder(ObjectReader &r) {
  SparseStructureDecoderArgs a;
  a.outChannels =
      r.integer("out_channels", positiveInt(kMaxChannels), std::nullopt);
  a.latentChannels =
      r.integer("latent_channels", positiveInt(kMaxChannels), std::nullopt);
  a.numResBlocks =
      r.integer("num_res_blocks", nonNegativeInt(64), std::nullopt);
  if (const JsonValue *ch = r.take("channels")) {
    if (auto list = parseChannelList(r, "channels", *ch, a.channelsPos))
      a.channels = std::move(*list);
  } else {
    a.channelsPos = r.absentPos("channels");
    r.missing("channels", "a non-empty array of positive integers");
  }
  a.numResBlocksMiddle =
      r.integer("num_res_blocks_middle", nonNegativeInt(64), 2);
  a.normType = r.enumeration<NormType>(
      "norm_type", {{"layer", NormType::Layer}, {"group", NormType::Group}},
      NormType::Layer);
  a.useFp16 = r.boolean("use_fp16", false);
  if (*a.normType == NormType::Group && r.good({"norm_type"}))
    for (const Located<int64_t> &c : a.channels)
      if (*c % 32 != 0)
        r.diags().error(c.pos, "expected a multiple of 32 (norm_type "
                               "\"group\" at " +
                                   a.normType.pos.location() +
                                   " is GroupNorm with 32 groups), found " +
                                   std::to_string(*c));
  return a;
}

GaussianRepresentation parseGaussianRep(ObjectReader &r) {
  GaussianRepresentation g;
  if (const JsonValue *lr = r.object("lr")) {
    ObjectReader lrr(r.diags(), r.file(), *lr, r.pathOf("lr"));
    g.lrXyz = lrr.number("_xyz", anyFiniteNumber(), std::nullopt);
    g.lrFeaturesDc =
        lrr.number("_features_dc", anyFiniteNumber(), std::nullopt);
    g.lrOpacity = lrr.number("_opacity", anyFiniteNumber(), std::nullopt);
    g.lrScaling = lrr.number("_scaling", anyFiniteNumber(), std::nullopt);
    g.lrRotation = lrr.number("_rotation", anyFiniteNumber(), std::nullopt);
    lrr.finish(false, "a learning-rate multiplier of a Gaussian field");
  }
  g.perturbOffset = r.boolean("perturb_offset", std::nullopt);
  g.voxelSize = r.number("voxel_size", positiveNumber(), std::nullopt);
  if (r.good({"perturb_offset", "voxel_size"}) && *g.perturbOffset &&
      *g.voxelSize <= 1.0)
    r.diags().error(g.voxelSize.pos,
                    "expected a number greater than 1 (offset_perturbation = "
                    "atanh((2h - 1) / voxel_size) with |2h - 1| up to 1), "
                    "found " +
                        r.json().find("voxel_size")->describe());
  g.numGaussians = r.integer("num_gaussians", positiveInt(4096), std::nullopt);
  g.filter2dKernelSize =
      r.number("2d_filter_kernel_size", nonNegativeNumber(), std::nullopt);
  g.filter3dKernelSize =
      r.number("3d_filter_kernel_size", nonNegativeNumber(), std::nullopt);
  g.scalingBias = r.number("scaling_bias", positiveNumber(), std::nullopt);
  g.opacityBias = r.number(
      "opacity_bias", {0, false, 1, false, "a number in (0, 1)"}, std::nullopt);
  g.scalingActivation = r.enumeration<ScalingActivation>(
      "scaling_activation",
      {{"softplus", ScalingActivation::Softplus},
       {"exp", ScalingActivation::Exp}},
      std::nullopt);
  return g;
}

SLatDecoderArgs parseDecoder(ObjectReader &r, ModelKind kind,
                             std::string_view className) {
  SLatDecoderArgs a;
  a.resolution =
      r.integer("resolution", positiveInt(kMaxResolution), std::nullopt);
  a.modelChannels =
      r.integer("model_channels", positiveInt(kMaxChannels), std::nullopt);
  a.latentChannels =
      r.integer("latent_channels", positiveInt(kMaxChannels), std::nullopt);
  a.numBlocks = r.integer("num_blocks", positiveInt(kMaxBlocks), std::nullopt);
  parseHeads(r, a.modelChannels, a.numHeads, a.numHeadChannels);
  a.mlpRatio = parseMlpRatio(r, a.modelChannels);
  constexpr std::string_view kSerialized =
      "serialized attention is a TRELLIS option that trellisc does not "
      "compile; every released decoder uses \"swin\"";
  a.attnMode = r.enumeration<AttnMode>(
      "attn_mode", {{"swin", AttnMode::Swin}, {"full", AttnMode::Full}},
      AttnMode::Swin,
      {{"shift_window", kSerialized},
       {"shift_sequence", kSerialized},
       {"shift_order", kSerialized}});
  a.windowSize = r.integer("window_size", positiveInt(1024), 8);
  a.peMode = parsePeMode(r);
  a.useFp16 = r.boolean("use_fp16", false);
  a.useCheckpoint = r.boolean("use_checkpoint", false);
  a.qkRmsNorm = r.boolean("qk_rms_norm", false);

  if (kind == ModelKind::SLatMeshDecoder && r.good({"model_channels"}) &&
      *a.modelChannels % 256 != 0)
    r.diags().error(a.modelChannels.pos,
                    "expected a multiple of 256 (the mesh decoder's "
                    "GroupNorm(32) runs on model_channels, model_channels/4 "
                    "and model_channels/8 channels), found " +
                        std::to_string(*a.modelChannels));

  const JsonValue *rep = r.object("representation_config");
  a.representationPos =
      rep ? posOf(r.file(), *rep, r.pathOf("representation_config"))
          : r.absentPos("representation_config");
  std::string repContext =
      "a representation_config key of " + std::string(className);
  switch (kind) {
  case ModelKind::SLatGaussianDecoder: {
    if (rep) {
      ObjectReader rr(r.diags(), r.file(), *rep,
                      r.pathOf("representation_config"));
      a.representation = parseGaussianRep(rr);
      rr.finish(false, repContext);
    } else {
      a.representation = GaussianRepresentation{};
    }
    break;
  }
  case ModelKind::SLatRadianceFieldDecoder: {
    RadianceFieldRepresentation rf;
    if (rep) {
      ObjectReader rr(r.diags(), r.file(), *rep,
                      r.pathOf("representation_config"));
      rf.rank = rr.integer("rank", positiveInt(4096), std::nullopt);
      rf.dim = rr.integer("dim", positiveInt(4096), std::nullopt);
      rr.finish(false, repContext);
    }
    a.representation = rf;
    break;
  }
  default: {
    MeshRepresentation m;
    if (rep) {
      ObjectReader rr(r.diags(), r.file(), *rep,
                      r.pathOf("representation_config"));
      m.useColor = rr.boolean("use_color", false);
      rr.finish(false, repContext);
    } else {
      m.useColor.pos = a.representationPos;
      m.useColor.defaulted = true;
    }
    a.representation = m;
    break;
  }
  }
  return a;
}

std::string knownClassList() {
  std::string s;
  for (const ClassName &c : kClasses) {
    if (!s.empty())
      s += ", ";
    s += c.name;
  }
  return s;
}

} // namespace

Result<ModelConfig> parseModelConfig(const JsonDocument &doc,
                                     std::vector<Diagnostic> *diagnostics) {
  Diagnostics diags;
  ModelConfig cfg;
  cfg.file = doc.file;
  auto done = [&]() -> Result<ModelConfig> {
    if (diagnostics)
      *diagnostics = diags.all();
    if (diags.hasErrors())
      return diags.toError();
    cfg.warnings = diags.warnings();
    return std::move(cfg);
  };

  if (!doc.root.isObject()) {
    diags.error(posOf(doc.file, doc.root, "(top level)"),
                "expected a sidecar object {\"name\": <model class>, "
                "\"args\": {...}}, found " +
                    doc.root.describe());
    return done();
  }
  ObjectReader top(diags, doc.file, doc.root, "");
  cfg.name = top.string("name", std::nullopt);
  std::optional<ModelClassInfo> info;
  if (top.good({"name"})) {
    info = parseModelClassName(*cfg.name);
    if (!info) {
      std::string why;
      if (cfg.name->find("Encoder") != std::string::npos)
        why = " (an encoder: inference does not use it)";
      diags.error(cfg.name.pos, "expected a TRELLIS model class used by "
                                "inference (" +
                                    knownClassList() + "), found " +
                                    jsonQuote(*cfg.name) + why);
    }
  }
  const JsonValue *args = top.object("args");
  top.finish(false, "a sidecar key");
  if (!args || !info)
    return done();

  cfg.kind = info->kind;
  cfg.elastic = info->elastic;
  cfg.argsPos = posOf(doc.file, *args, "args");
  ObjectReader r(diags, doc.file, *args, "args");
  std::string context = "an argument of " + *cfg.name;
  switch (info->kind) {
  case ModelKind::SparseStructureFlow:
    cfg.args = parseSSFlow(r);
    break;
  case ModelKind::SparseStructureDecoder:
    cfg.args = parseSSDecoder(r);
    break;
  case ModelKind::SLatFlow:
    cfg.args = parseSLatFlow(r);
    break;
  default:
    cfg.args = parseDecoder(r, info->kind, *cfg.name);
    break;
  }
  r.finish(true, context);
  return done();
}

Result<ModelConfig> parseModelConfig(std::string_view text,
                                     const std::string &file,
                                     std::vector<Diagnostic> *diagnostics) {
  Result<JsonDocument> doc = parseJson(text, file);
  if (!doc)
    return doc.takeError();
  return parseModelConfig(doc.value(), diagnostics);
}

Result<ModelConfig> readModelConfig(const std::string &path,
                                    std::vector<Diagnostic> *diagnostics) {
  Result<JsonDocument> doc = readJsonFile(path);
  if (!doc)
    return doc.takeError();
  return parseModelConfig(doc.value(), diagnostics);
}

} // namespace trellis::config
