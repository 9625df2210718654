//===- PipelineConfig.h - pipeline.json and the whole model directory -----===//
//
// pipeline.json (spec §1.1–§1.4) is {"name": <pipeline class>, "args": {
//   "models": {key: "ckpts/<name>" | "<owner>/<repo>/<sub/path>", ...},
//   "sparse_structure_sampler" / "slat_sampler":
//       {"name", "args": {"sigma_min"}, "params": {steps, cfg_strength,
//        cfg_interval, rescale_t}},
//   "slat_normalization": {"mean": [...], "std": [...]},
//   "image_cond_model" (image pipeline) | "text_cond_model" (text pipeline)}}
//
// parsePipelineConfig() validates the file alone. loadPipeline() also
// resolves every checkpoint path the way TRELLIS does — `<dir>/<path>` first,
// then the `owner/repo/sub/path` form of the text pipelines, which trellisc
// resolves to the sibling directory `<dir>/../<repo>/<sub/path>` (no network)
// — parses each sidecar (ModelConfig.h) and checks the models against each
// other (latent channels, resolutions, condition width).
//
// Sampler params are defaults: applyOverrides() merges run-time values on top
// ({**defaults, **overrides}, as TRELLIS's run() does) and validates them.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_CONFIG_PIPELINECONFIG_H
#define TRELLIS_CONFIG_PIPELINECONFIG_H

#include "trellis/Config/Json.h"
#include "trellis/Config/Located.h"
#include "trellis/Config/ModelConfig.h"
#include "trellis/Support/Result.h"

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trellis::config {

enum class PipelineClass { ImageTo3D, TextTo3D };

/// "TrellisImageTo3DPipeline" / "TrellisTextTo3DPipeline".
std::string_view pipelineClassName(PipelineClass c);

enum class SamplerKind {
  FlowEuler,                 // no guidance
  FlowEulerCfg,              // guidance at every step
  FlowEulerGuidanceInterval, // guidance for t in cfg_interval (the release)
};

std::string_view samplerKindName(SamplerKind k);

/// The keyword arguments of the sampler's sample(). Absent keys take the
/// defaults of FlowEulerGuidanceIntervalSampler.sample (steps 50,
/// cfg_strength 3.0, cfg_interval [0, 1], rescale_t 1.0) and are `defaulted`.
struct SamplerParams {
  Located<int64_t> steps;
  Located<double> cfgStrength;
  Located<std::array<double, 2>> cfgInterval;
  Located<double> rescaleT;
};

struct SamplerConfig {
  SourcePos pos; // the sampler object
  Located<std::string> name;
  SamplerKind kind = SamplerKind::FlowEulerGuidanceInterval;
  Located<double> sigmaMin;
  SamplerParams params;
};

/// Run-time values for a sampler's params. `origin` names where they come
/// from in messages and in the positions of the merged values ("command
/// line", "trellis_run() options", ...).
struct SamplerOverrides {
  std::optional<int64_t> steps;
  std::optional<double> cfgStrength;
  std::optional<std::array<double, 2>> cfgInterval;
  std::optional<double> rescaleT;
  std::string origin = "run-time override";
};

/// {**defaults, **overrides}: every override replaces the default and gets
/// the position (origin, line 0, the param's JSON path); the merged values
/// are validated with the rules of pipeline.json. Errors name the override
/// and the default it replaced.
Result<SamplerParams> applyOverrides(const SamplerParams &defaults,
                                     const SamplerOverrides &overrides);

/// One entry of args.models.
struct ModelRef {
  std::string key; // "slat_flow_model"
  Located<std::string>
      path; // as written: "ckpts/slat_flow_img_dit_L_64l8p2_fp16"
  /// Filled by loadPipeline(): the checkpoint base path (no extension) that
  /// was found, and whether it came from the owner/repo/sub/path fallback.
  std::string resolved;
  bool viaRepoFallback = false;
  /// Filled by loadPipeline(): the parsed sidecar.
  std::optional<ModelConfig> config;

  std::string sidecarPath() const { return resolved + ".json"; }
  std::string weightsPath() const { return resolved + ".safetensors"; }
};

struct PipelineConfig {
  std::string file; // pipeline.json as named in messages
  std::string dir;  // its directory ("." if none)
  Located<std::string> name;
  PipelineClass pipelineClass = PipelineClass::ImageTo3D;
  SourcePos modelsPos;
  std::vector<ModelRef> models; // in file order
  SamplerConfig sparseStructureSampler, slatSampler;
  SourcePos normalizationPos;
  std::vector<Located<double>> slatMean, slatStd;
  std::optional<Located<std::string>> imageCondModel, textCondModel;
  std::vector<Diagnostic> warnings;

  /// The entry for `key` ("sparse_structure_flow_model"), or null.
  const ModelRef *model(std::string_view key) const;
};

/// The model keys the inference code uses (spec §1.1).
inline constexpr std::string_view kSparseStructureFlowKey =
    "sparse_structure_flow_model";
inline constexpr std::string_view kSparseStructureDecoderKey =
    "sparse_structure_decoder";
inline constexpr std::string_view kSLatFlowKey = "slat_flow_model";
inline constexpr std::string_view kGaussianDecoderKey = "slat_decoder_gs";
inline constexpr std::string_view kRadianceFieldDecoderKey = "slat_decoder_rf";
inline constexpr std::string_view kMeshDecoderKey = "slat_decoder_mesh";

/// The model family a key must name (null for unknown keys).
std::optional<ModelKind> modelKindForKey(std::string_view key);

/// Validates pipeline.json alone (no file system access). `file` names it in
/// messages; `dir` is recorded for later path resolution. On failure the
/// message lists every error, one per line; `diagnostics` (optional)
/// receives the structured records, warnings included.
Result<PipelineConfig>
parsePipelineConfig(const JsonDocument &doc,
                    std::vector<Diagnostic> *diagnostics = nullptr);
Result<PipelineConfig>
parsePipelineConfig(std::string_view text, const std::string &file,
                    std::vector<Diagnostic> *diagnostics = nullptr);

/// Reads `path` (a pipeline.json, or a directory holding one), resolves and
/// parses every sidecar of the keys above, and checks the models against
/// each other. Unknown model keys are warned about and not loaded.
Result<PipelineConfig>
loadPipeline(const std::string &path,
             std::vector<Diagnostic> *diagnostics = nullptr);

} // namespace trellis::config

#endif // TRELLIS_CONFIG_PIPELINECONFIG_H
