//===- PipelineConfig.cpp - pipeline.json and the whole model directory ---===//
//
// Mirrors TrellisImageTo3DPipeline / TrellisTextTo3DPipeline.from_pretrained
// (trellis/pipelines/*.py) and the samplers' sample() signatures.
//
//===----------------------------------------------------------------------===//

#include "trellis/Config/PipelineConfig.h"

#include "lib/Config/Reader.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace trellis::config {

using namespace detail;

std::string_view pipelineClassName(PipelineClass c) {
  return c == PipelineClass::ImageTo3D ? "TrellisImageTo3DPipeline"
                                       : "TrellisTextTo3DPipeline";
}

std::string_view samplerKindName(SamplerKind k) {
  switch (k) {
  case SamplerKind::FlowEuler:
    return "FlowEulerSampler";
  case SamplerKind::FlowEulerCfg:
    return "FlowEulerCfgSampler";
  case SamplerKind::FlowEulerGuidanceInterval:
    return "FlowEulerGuidanceIntervalSampler";
  }
  return "";
}

std::optional<ModelKind> modelKindForKey(std::string_view key) {
  if (key == kSparseStructureFlowKey)
    return ModelKind::SparseStructureFlow;
  if (key == kSparseStructureDecoderKey)
    return ModelKind::SparseStructureDecoder;
  if (key == kSLatFlowKey)
    return ModelKind::SLatFlow;
  if (key == kGaussianDecoderKey)
    return ModelKind::SLatGaussianDecoder;
  if (key == kRadianceFieldDecoderKey)
    return ModelKind::SLatRadianceFieldDecoder;
  if (key == kMeshDecoderKey)
    return ModelKind::SLatMeshDecoder;
  return std::nullopt;
}

const ModelRef *PipelineConfig::model(std::string_view key) const {
  for (const ModelRef &m : models)
    if (m.key == key)
      return &m;
  return nullptr;
}

namespace {

constexpr int64_t kMaxSteps = 10000;

// Defaults of FlowEulerGuidanceIntervalSampler.sample().
constexpr int64_t kDefaultSteps = 50;
constexpr double kDefaultCfgStrength = 3.0;
constexpr std::array<double, 2> kDefaultCfgInterval = {0.0, 1.0};
constexpr double kDefaultRescaleT = 1.0;

std::string formatNumber(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  // Shortest representation that round-trips.
  for (int prec = 1; prec <= 17; ++prec) {
    char b2[32];
    std::snprintf(b2, sizeof b2, "%.*g", prec, d);
    if (std::strtod(b2, nullptr) == d)
      return b2;
  }
  return buf;
}

std::string formatInterval(const std::array<double, 2> &v) {
  return "[" + formatNumber(v[0]) + ", " + formatNumber(v[1]) + "]";
}

// The rules for sampler params, shared by pipeline.json and overrides. Each
// returns the "expected ..., found ..." text of a violation, or "".
std::string stepsProblem(int64_t v) {
  if (v < 1 || v > kMaxSteps)
    return "expected a positive integer no larger than " +
           std::to_string(kMaxSteps) + ", found " + std::to_string(v);
  return "";
}
std::string cfgStrengthProblem(double v) {
  if (!std::isfinite(v) || v < 0)
    return "expected a non-negative number, found " + formatNumber(v);
  return "";
}
std::string cfgIntervalProblem(const std::array<double, 2> &v) {
  if (!std::isfinite(v[0]) || !std::isfinite(v[1]) || v[0] > v[1])
    return "expected [low, high] with finite low <= high, found " +
           formatInterval(v);
  return "";
}
std::string rescaleTProblem(double v) {
  if (!std::isfinite(v) || v <= 0)
    return "expected a positive number, found " + formatNumber(v);
  return "";
}

SamplerParams parseParams(ObjectReader &r, SamplerKind kind) {
  SamplerParams p;
  p.steps = r.integer("steps", positiveInt(kMaxSteps), kDefaultSteps);
  p.rescaleT = r.number("rescale_t", positiveNumber(), kDefaultRescaleT);
  p.cfgStrength =
      r.number("cfg_strength", nonNegativeNumber(), kDefaultCfgStrength);
  const JsonValue *iv = r.take("cfg_interval");
  p.cfgInterval.value = kDefaultCfgInterval;
  if (!iv) {
    p.cfgInterval.pos = r.absentPos("cfg_interval");
    p.cfgInterval.defaulted = true;
  } else {
    p.cfgInterval.pos = posOf(r.file(), *iv, r.pathOf("cfg_interval"));
    if (!iv->isArray() || iv->size() != 2) {
      r.diags().error(p.cfgInterval.pos,
                      "expected an array of 2 numbers [low, high], found " +
                          iv->describe());
    } else {
      bool ok = true;
      std::array<double, 2> v{};
      for (size_t i = 0; i < 2; ++i) {
        SourcePos ep =
            posOf(r.file(), (*iv)[i], jsonPathIndex(p.cfgInterval.pos.path, i));
        if (auto d = checkNumber(r.diags(), ep, (*iv)[i], anyFiniteNumber()))
          v[i] = *d;
        else
          ok = false;
      }
      if (ok) {
        std::string problem = cfgIntervalProblem(v);
        if (!problem.empty())
          r.diags().error(p.cfgInterval.pos, problem);
        else
          p.cfgInterval.value = v;
      }
    }
  }
  // TRELLIS passes unknown params on to the model's forward(), which fails:
  // only the guidance sampler takes an interval, only the guided ones a
  // strength.
  if (kind == SamplerKind::FlowEuler && !p.cfgStrength.defaulted)
    r.diags().error(p.cfgStrength.pos,
                    "expected no cfg_strength for FlowEulerSampler (it has no "
                    "guidance), found " +
                        r.json().find("cfg_strength")->describe());
  if (kind != SamplerKind::FlowEulerGuidanceInterval && iv)
    r.diags().error(p.cfgInterval.pos,
                    "expected no cfg_interval for " +
                        std::string(samplerKindName(kind)) +
                        " (only FlowEulerGuidanceIntervalSampler takes one), "
                        "found " +
                        iv->describe());
  if (const JsonValue *verbose = r.take("verbose"))
    if (!verbose->isBool())
      r.diags().error(posOf(r.file(), *verbose, r.pathOf("verbose")),
                      "expected true or false, found " + verbose->describe());
  return p;
}

SamplerConfig parseSampler(ObjectReader &args, std::string_view key) {
  SamplerConfig s;
  const JsonValue *obj = args.object(key);
  s.pos =
      obj ? posOf(args.file(), *obj, args.pathOf(key)) : args.absentPos(key);
  auto absentDefaults = [&]() {
    s.sigmaMin.pos = s.pos;
    s.params.steps = {kDefaultSteps, s.pos, true};
    s.params.cfgStrength = {kDefaultCfgStrength, s.pos, true};
    s.params.cfgInterval = {kDefaultCfgInterval, s.pos, true};
    s.params.rescaleT = {kDefaultRescaleT, s.pos, true};
  };
  if (!obj) {
    absentDefaults();
    return s;
  }
  ObjectReader r(args.diags(), args.file(), *obj, args.pathOf(key));
  s.name = r.string("name", std::nullopt);
  bool known = false;
  for (SamplerKind k : {SamplerKind::FlowEuler, SamplerKind::FlowEulerCfg,
                        SamplerKind::FlowEulerGuidanceInterval})
    if (*s.name == samplerKindName(k)) {
      s.kind = k;
      known = true;
    }
  if (!known && r.good({"name"}))
    r.diags().error(s.name.pos,
                    "expected \"FlowEulerSampler\", \"FlowEulerCfgSampler\" "
                    "or \"FlowEulerGuidanceIntervalSampler\", found " +
                        jsonQuote(*s.name));
  if (const JsonValue *a = r.object("args")) {
    ObjectReader ar(r.diags(), r.file(), *a, r.pathOf("args"));
    s.sigmaMin = ar.number(
        "sigma_min", {0, true, 1, false, "a number in [0, 1)"}, std::nullopt);
    ar.finish(true, "an argument of the sampler's constructor");
  } else {
    s.sigmaMin.pos = r.absentPos("args");
  }
  if (const JsonValue *p = r.object("params")) {
    ObjectReader pr(r.diags(), r.file(), *p, r.pathOf("params"));
    s.params = parseParams(pr, s.kind);
    pr.finish(true, "a keyword argument of " +
                        std::string(samplerKindName(s.kind)) + ".sample()");
  } else {
    SourcePos sigma = s.sigmaMin.pos;
    absentDefaults();
    s.sigmaMin.pos = sigma;
  }
  r.finish(false, "a sampler key");
  return s;
}

std::vector<Located<double>> parseNumberArray(ObjectReader &r,
                                              std::string_view key,
                                              const NumberRule &rule) {
  std::vector<Located<double>> out;
  const JsonValue *v = r.take(key);
  if (!v) {
    r.missing(key, "an array of numbers");
    return out;
  }
  SourcePos pos = posOf(r.file(), *v, r.pathOf(key));
  if (!v->isArray() || v->size() == 0 || v->size() > 4096) {
    r.diags().error(pos, "expected a non-empty array of numbers, found " +
                             v->describe());
    r.markBad(key);
    return out;
  }
  bool ok = true;
  for (size_t i = 0; i < v->size(); ++i) {
    Located<double> e;
    e.pos = posOf(r.file(), (*v)[i], jsonPathIndex(pos.path, i));
    if (auto d = checkNumber(r.diags(), e.pos, (*v)[i], rule))
      e.value = *d;
    else
      ok = false;
    out.push_back(e);
  }
  if (!ok)
    r.markBad(key);
  return out;
}

std::string parentDir(const std::string &file) {
  std::string dir = std::filesystem::path(file).parent_path().string();
  return dir.empty() ? "." : dir;
}

} // namespace

Result<SamplerParams> applyOverrides(const SamplerParams &defaults,
                                     const SamplerOverrides &overrides) {
  SamplerParams out = defaults;
  std::vector<std::string> errors;
  auto place = [&](SourcePos &pos) {
    pos.file = overrides.origin;
    pos.line = 0;
    pos.column = 0;
  };
  auto fail = [&](const SourcePos &original, const std::string &path,
                  const std::string &problem, const std::string &replaced) {
    errors.push_back(overrides.origin + ": " + path + ": " + problem +
                     " (it replaces " + replaced + " from " +
                     original.location() + ")");
  };
  if (overrides.steps) {
    std::string problem = stepsProblem(*overrides.steps);
    if (!problem.empty())
      fail(defaults.steps.pos, defaults.steps.pos.path, problem,
           std::to_string(*defaults.steps));
    out.steps.value = *overrides.steps;
    out.steps.defaulted = false;
    place(out.steps.pos);
  }
  if (overrides.cfgStrength) {
    std::string problem = cfgStrengthProblem(*overrides.cfgStrength);
    if (!problem.empty())
      fail(defaults.cfgStrength.pos, defaults.cfgStrength.pos.path, problem,
           formatNumber(*defaults.cfgStrength));
    out.cfgStrength.value = *overrides.cfgStrength;
    out.cfgStrength.defaulted = false;
    place(out.cfgStrength.pos);
  }
  if (overrides.cfgInterval) {
    std::string problem = cfgIntervalProblem(*overrides.cfgInterval);
    if (!problem.empty())
      fail(defaults.cfgInterval.pos, defaults.cfgInterval.pos.path, problem,
           formatInterval(*defaults.cfgInterval));
    out.cfgInterval.value = *overrides.cfgInterval;
    out.cfgInterval.defaulted = false;
    place(out.cfgInterval.pos);
  }
  if (overrides.rescaleT) {
    std::string problem = rescaleTProblem(*overrides.rescaleT);
    if (!problem.empty())
      fail(defaults.rescaleT.pos, defaults.rescaleT.pos.path, problem,
           formatNumber(*defaults.rescaleT));
    out.rescaleT.value = *overrides.rescaleT;
    out.rescaleT.defaulted = false;
    place(out.rescaleT.pos);
  }
  if (!errors.empty()) {
    std::string message;
    for (const std::string &e : errors)
      message += (message.empty() ? "" : "\n") + e;
    return Error{message};
  }
  return out;
}

Result<PipelineConfig>
parsePipelineConfig(const JsonDocument &doc,
                    std::vector<Diagnostic> *diagnostics) {
  Diagnostics diags;
  PipelineConfig cfg;
  cfg.file = doc.file;
  cfg.dir = parentDir(doc.file);
  auto done = [&]() -> Result<PipelineConfig> {
    if (diagnostics)
      *diagnostics = diags.all();
    if (diags.hasErrors())
      return diags.toError();
    cfg.warnings = diags.warnings();
    return std::move(cfg);
  };
  if (!doc.root.isObject()) {
    diags.error(posOf(doc.file, doc.root, "(top level)"),
                "expected a pipeline object {\"name\": <pipeline class>, "
                "\"args\": {...}}, found " +
                    doc.root.describe());
    return done();
  }
  ObjectReader top(diags, doc.file, doc.root, "");
  cfg.name = top.string("name", std::nullopt);
  if (*cfg.name == "TrellisImageTo3DPipeline")
    cfg.pipelineClass = PipelineClass::ImageTo3D;
  else if (*cfg.name == "TrellisTextTo3DPipeline")
    cfg.pipelineClass = PipelineClass::TextTo3D;
  else if (top.good({"name"}))
    diags.error(cfg.name.pos, "expected \"TrellisImageTo3DPipeline\" or "
                              "\"TrellisTextTo3DPipeline\", found " +
                                  jsonQuote(*cfg.name));
  const JsonValue *args = top.object("args");
  top.finish(false, "a pipeline.json key");
  if (!args)
    return done();
  ObjectReader r(diags, doc.file, *args, "args");

  // models
  if (const JsonValue *models = r.object("models")) {
    cfg.modelsPos = posOf(doc.file, *models, "args.models");
    for (size_t i = 0; i < models->size(); ++i) {
      ModelRef ref;
      ref.key = models->key(i);
      const JsonValue &v = (*models)[i];
      ref.path.pos = posOf(doc.file, v, jsonPathKey("args.models", ref.key));
      if (!v.isString() || v.text().empty()) {
        diags.error(ref.path.pos,
                    "expected a checkpoint path without extension (like "
                    "\"ckpts/ss_flow_img_dit_L_16l8_fp16\"), found " +
                        v.describe());
        continue;
      }
      ref.path.value = v.text();
      if (!modelKindForKey(ref.key))
        diags.warning(SourcePos{doc.file, models->keyPos(i).line,
                                models->keyPos(i).column, ref.path.pos.path},
                      "expected a model key of the inference pipeline "
                      "(sparse_structure_flow_model, sparse_structure_decoder, "
                      "slat_flow_model, slat_decoder_gs, slat_decoder_rf, "
                      "slat_decoder_mesh), found " +
                          jsonQuote(ref.key) + "; it is not loaded");
      cfg.models.push_back(std::move(ref));
    }
    for (std::string_view key :
         {kSparseStructureFlowKey, kSparseStructureDecoderKey, kSLatFlowKey})
      if (!models->find(key))
        diags.error(cfg.modelsPos, "expected key " + jsonQuote(key) +
                                       " (a checkpoint path), found an "
                                       "object without it");
    if (!models->find(kGaussianDecoderKey) &&
        !models->find(kRadianceFieldDecoderKey) &&
        !models->find(kMeshDecoderKey))
      diags.error(cfg.modelsPos,
                  "expected at least one decoder (\"slat_decoder_gs\", "
                  "\"slat_decoder_rf\" or \"slat_decoder_mesh\"), found none");
  } else {
    cfg.modelsPos = r.absentPos("models");
  }

  cfg.sparseStructureSampler = parseSampler(r, "sparse_structure_sampler");
  cfg.slatSampler = parseSampler(r, "slat_sampler");

  if (const JsonValue *norm = r.object("slat_normalization")) {
    cfg.normalizationPos = posOf(doc.file, *norm, "args.slat_normalization");
    ObjectReader nr(diags, doc.file, *norm, "args.slat_normalization");
    cfg.slatMean = parseNumberArray(nr, "mean", anyFiniteNumber());
    cfg.slatStd = parseNumberArray(nr, "std", positiveNumber());
    if (nr.good({"mean", "std"}) && cfg.slatMean.size() != cfg.slatStd.size())
      diags.error(
          posOf(doc.file, *norm->find("std"), "args.slat_normalization.std"),
          "expected " + std::to_string(cfg.slatMean.size()) +
              " values (as many as mean), found " +
              std::to_string(cfg.slatStd.size()));
    nr.finish(false, "a slat_normalization key");
  } else {
    cfg.normalizationPos = r.absentPos("slat_normalization");
  }

  const char *condKey = cfg.pipelineClass == PipelineClass::ImageTo3D
                            ? "image_cond_model"
                            : "text_cond_model";
  const char *otherKey = cfg.pipelineClass == PipelineClass::ImageTo3D
                             ? "text_cond_model"
                             : "image_cond_model";
  Located<std::string> cond = r.string(condKey, std::nullopt);
  if (cfg.pipelineClass == PipelineClass::ImageTo3D)
    cfg.imageCondModel = cond;
  else
    cfg.textCondModel = cond;
  if (const JsonValue *other = r.take(otherKey))
    diags.warning(posOf(doc.file, *other, r.pathOf(otherKey)),
                  std::string("expected no ") + otherKey + " in a " +
                      std::string(pipelineClassName(cfg.pipelineClass)) +
                      " (it reads " + condKey + "), found " +
                      other->describe() + "; it is ignored");
  r.finish(false, "a pipeline argument");
  return done();
}

Result<PipelineConfig>
parsePipelineConfig(std::string_view text, const std::string &file,
                    std::vector<Diagnostic> *diagnostics) {
  Result<JsonDocument> doc = parseJson(text, file);
  if (!doc)
    return doc.takeError();
  return parsePipelineConfig(doc.value(), diagnostics);
}

namespace {

bool isFile(const std::string &path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

/// Resolves one checkpoint path as TRELLIS's from_pretrained does: the
/// local `<dir>/<path>` first, then `owner/repo/sub/path` (a Hugging Face
/// repo), which trellisc maps to `<dir>/../<repo>/<sub/path>`.
void resolve(ModelRef &ref, const std::string &dir, Diagnostics &diags) {
  std::string primary = dir + "/" + *ref.path;
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t slash = ref.path->find('/', start);
    parts.push_back(ref.path->substr(start, slash - start));
    if (slash == std::string::npos)
      break;
    start = slash + 1;
  }
  std::string sibling;
  if (parts.size() >= 3 && !parts[0].empty() && !parts[1].empty()) {
    sibling = dir + "/../" + parts[1];
    for (size_t i = 2; i < parts.size(); ++i)
      sibling += "/" + parts[i];
  }
  std::vector<std::string> candidates = {primary};
  if (!sibling.empty())
    candidates.push_back(sibling);
  for (const std::string &c : candidates)
    if (isFile(c + ".json") && isFile(c + ".safetensors")) {
      ref.resolved = c;
      ref.viaRepoFallback = c == sibling;
      return;
    }
  for (const std::string &c : candidates)
    if (isFile(c + ".json")) {
      ref.resolved = c;
      ref.viaRepoFallback = c == sibling;
      return;
    }
  std::string message = "expected a checkpoint sidecar at " + primary + ".json";
  if (!sibling.empty())
    message += " or, reading " + jsonQuote(*ref.path) +
               " as \"owner/repo/sub/path\" of a Hugging Face repo, at the "
               "sibling directory " +
               sibling + ".json";
  message += ", found no such file";
  diags.error(ref.path.pos, message);
}

const ModelConfig *configOf(const PipelineConfig &cfg, std::string_view key) {
  const ModelRef *ref = cfg.model(key);
  return ref && ref->config ? &*ref->config : nullptr;
}

void expectEqual(Diagnostics &diags, const Located<int64_t> &value,
                 int64_t expected, const std::string &what) {
  if (*value != expected)
    diags.error(value.pos, "expected " + std::to_string(expected) + " (" +
                               what + "), found " + std::to_string(*value));
}

void crossCheck(PipelineConfig &cfg, Diagnostics &diags) {
  const ModelConfig *ssFlowCfg = configOf(cfg, kSparseStructureFlowKey);
  const ModelConfig *ssDecCfg = configOf(cfg, kSparseStructureDecoderKey);
  const ModelConfig *slatCfg = configOf(cfg, kSLatFlowKey);
  const SparseStructureFlowArgs *ssFlow =
      ssFlowCfg ? ssFlowCfg->ssFlow() : nullptr;
  const SparseStructureDecoderArgs *ssDec =
      ssDecCfg ? ssDecCfg->ssDecoder() : nullptr;
  const SLatFlowArgs *slat = slatCfg ? slatCfg->slatFlow() : nullptr;

  if (ssFlow) {
    expectEqual(diags, ssFlow->outChannels, *ssFlow->inChannels,
                "in_channels at " + ssFlow->inChannels.pos.location() +
                    ": the sampler steps the latent by the velocity");
  }
  if (slat) {
    expectEqual(diags, slat->outChannels, *slat->inChannels,
                "in_channels at " + slat->inChannels.pos.location() +
                    ": the sampler steps the latent by the velocity");
  }
  if (ssFlow && ssDec) {
    expectEqual(diags, ssDec->latentChannels, *ssFlow->outChannels,
                "out_channels of the sparse structure flow model at " +
                    ssFlow->outChannels.pos.location());
    expectEqual(diags, ssDec->outChannels, 1,
                "one occupancy logit per voxel: the pipeline keeps the "
                "voxels whose logit is > 0");
  }
  if (ssFlow && ssDec && slat && !ssDec->channels.empty()) {
    int64_t res = ssDec->outputResolution(*ssFlow->resolution);
    expectEqual(diags, slat->resolution, res,
                "the sparse structure decoder's output: latent resolution " +
                    std::to_string(*ssFlow->resolution) + " at " +
                    ssFlow->resolution.pos.location() + " doubled by " +
                    std::to_string(ssDec->channels.size() - 1) +
                    " upsampling stages of channels at " +
                    ssDec->channelsPos.location());
  }
  if (ssFlow && slat)
    expectEqual(diags, slat->condChannels, *ssFlow->condChannels,
                "cond_channels of the sparse structure flow model at " +
                    ssFlow->condChannels.pos.location() +
                    ": both stages read the same conditioning tokens");
  if (slat) {
    for (std::string_view key :
         {kGaussianDecoderKey, kRadianceFieldDecoderKey, kMeshDecoderKey}) {
      const ModelConfig *dc = configOf(cfg, key);
      const SLatDecoderArgs *dec = dc ? dc->slatDecoder() : nullptr;
      if (!dec)
        continue;
      expectEqual(diags, dec->latentChannels, *slat->outChannels,
                  "out_channels of the structured latent flow model at " +
                      slat->outChannels.pos.location());
      expectEqual(diags, dec->resolution, *slat->resolution,
                  "resolution of the structured latent flow model at " +
                      slat->resolution.pos.location());
    }
    if (!cfg.slatMean.empty() &&
        int64_t(cfg.slatMean.size()) != *slat->outChannels) {
      SourcePos p = cfg.slatMean.front().pos;
      p.path = "args.slat_normalization.mean";
      diags.error(p, "expected " + std::to_string(*slat->outChannels) +
                         " values (one per latent channel: out_channels at " +
                         slat->outChannels.pos.location() + "), found " +
                         std::to_string(cfg.slatMean.size()));
    }
  }
}

} // namespace

Result<PipelineConfig> loadPipeline(const std::string &path,
                                    std::vector<Diagnostic> *diagnostics) {
  std::string file = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    file = (path.empty() || path.back() == '/') ? path + "pipeline.json"
                                                : path + "/pipeline.json";
  if (!isFile(file))
    return Error{file + ": expected a pipeline.json file, found " +
                 (std::filesystem::exists(file, ec) ? "something else"
                                                    : "no such file")};
  Result<JsonDocument> doc = readJsonFile(file);
  if (!doc)
    return doc.takeError();
  std::vector<Diagnostic> pipelineDiags;
  Result<PipelineConfig> parsed =
      parsePipelineConfig(doc.value(), &pipelineDiags);
  if (!parsed) {
    if (diagnostics)
      *diagnostics = pipelineDiags;
    return parsed.takeError();
  }
  PipelineConfig cfg = std::move(parsed.value());
  Diagnostics diags;
  diags.append(pipelineDiags);

  for (ModelRef &ref : cfg.models) {
    std::optional<ModelKind> expected = modelKindForKey(ref.key);
    if (!expected)
      continue;
    resolve(ref, cfg.dir, diags);
    if (ref.resolved.empty())
      continue;
    std::vector<Diagnostic> sidecarDiags;
    Result<ModelConfig> model =
        readModelConfig(ref.sidecarPath(), &sidecarDiags);
    if (!model) {
      if (sidecarDiags.empty())
        diags.error(SourcePos{}, model.message()); // JSON syntax error
      else
        diags.append(sidecarDiags);
      continue;
    }
    diags.append(sidecarDiags);
    if (model->kind != *expected) {
      diags.error(model->name.pos,
                  "expected a " + std::string(modelKindDescription(*expected)) +
                      " class for " + ref.path.pos.describe() + ", found " +
                      jsonQuote(*model->name) + " (a " +
                      std::string(modelKindDescription(model->kind)) + ")");
      continue;
    }
    ref.config = std::move(model.value());
  }
  if (!diags.hasErrors())
    crossCheck(cfg, diags);
  if (diagnostics)
    *diagnostics = diags.all();
  if (diags.hasErrors())
    return diags.toError();
  cfg.warnings = diags.warnings();
  return cfg;
}

} // namespace trellis::config
