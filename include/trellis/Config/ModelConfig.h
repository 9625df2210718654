//===- ModelConfig.h - Checkpoint sidecars (ckpts/<name>.json) ------------===//
//
// A sidecar is {"name": <model class>, "args": {constructor kwargs}} (spec
// §1.3). TRELLIS instantiates `name(**args)`, so:
//  * every arg is typed and validated here as the constructor would use it
//    (defaults where the constructor has one, divisibility such as
//    model_channels % num_heads == 0, positive counts, known enums);
//  * an arg the constructor does not take is an error (Python would raise a
//    TypeError), while unknown keys inside representation_config (a plain
//    dict) are warnings.
// Values that TRELLIS accepts but trellisc cannot compile (pe_mode "rope",
// the serialized attention modes) are errors that say so.
//
// Sanity limits (widths <= 65536, blocks <= 1024, resolution <= 4096, ...)
// keep a hostile file from asking for absurd tensor lists.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_CONFIG_MODELCONFIG_H
#define TRELLIS_CONFIG_MODELCONFIG_H

#include "trellis/Config/Json.h"
#include "trellis/Config/Located.h"
#include "trellis/Support/Result.h"

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace trellis::config {

/// The six model families of the inference pipeline (Elastic* classes are the
/// same family: they behave identically at inference, spec §6.8).
enum class ModelKind {
  SparseStructureFlow,
  SparseStructureDecoder,
  SLatFlow,
  SLatGaussianDecoder,
  SLatRadianceFieldDecoder,
  SLatMeshDecoder,
};

/// "sparse structure flow model", ...
std::string_view modelKindDescription(ModelKind kind);

/// Parses a sidecar class name ("ElasticSLatFlowModel" -> SLatFlow, elastic).
struct ModelClassInfo {
  ModelKind kind;
  bool elastic;
};
std::optional<ModelClassInfo> parseModelClassName(std::string_view name);

enum class PeMode { Ape };
enum class AttnMode { Full, Swin };
enum class NormType { Layer, Group };
enum class ScalingActivation { Softplus, Exp };

/// Args shared by the two DiT flow models.
struct FlowCommonArgs {
  Located<int64_t> resolution, inChannels, modelChannels, condChannels,
      outChannels, numBlocks;
  /// num_heads as given, or model_channels // num_head_channels (defaulted).
  Located<int64_t> numHeads;
  Located<int64_t> numHeadChannels;
  Located<double> mlpRatio;
  Located<int64_t> patchSize;
  Located<PeMode> peMode;
  Located<bool> useFp16, useCheckpoint, shareMod, qkRmsNorm, qkRmsNormCross;

  int64_t headDim() const { return *modelChannels / *numHeads; }
  /// int(model_channels * mlp_ratio), as FeedForwardNet computes it.
  int64_t mlpHidden() const;
};

/// SparseStructureFlowModel (spec §4).
struct SparseStructureFlowArgs : FlowCommonArgs {
  /// Tokens per sample: (resolution / patch_size)^3.
  int64_t numTokens() const;
};

/// SLatFlowModel / ElasticSLatFlowModel (spec §6).
struct SLatFlowArgs : FlowCommonArgs {
  Located<int64_t> numIoResBlocks;
  /// Absent or null: no input/output res blocks (and no down/upsampling).
  std::optional<std::vector<Located<int64_t>>> ioBlockChannels;
  SourcePos ioBlockChannelsPos;
  Located<bool> useSkipConnection;
};

/// SparseStructureDecoder (spec §5).
struct SparseStructureDecoderArgs {
  Located<int64_t> outChannels, latentChannels, numResBlocks;
  std::vector<Located<int64_t>> channels;
  SourcePos channelsPos;
  Located<int64_t> numResBlocksMiddle;
  Located<NormType> normType;
  Located<bool> useFp16;

  /// Output resolution for a latent of `latentResolution`: each channel
  /// stage after the first doubles it.
  int64_t outputResolution(int64_t latentResolution) const;
};

struct GaussianRepresentation {
  Located<double> lrXyz, lrFeaturesDc, lrOpacity, lrScaling, lrRotation;
  Located<bool> perturbOffset;
  Located<double> voxelSize;
  Located<int64_t> numGaussians;
  Located<double> filter2dKernelSize, filter3dKernelSize;
  Located<double> scalingBias, opacityBias;
  Located<ScalingActivation> scalingActivation;
};

struct RadianceFieldRepresentation {
  Located<int64_t> rank, dim;
};

struct MeshRepresentation {
  Located<bool> useColor;
};

/// SLat{Gaussian,RadianceField,Mesh}Decoder and their Elastic* twins (§7).
struct SLatDecoderArgs {
  Located<int64_t> resolution, modelChannels, latentChannels, numBlocks;
  Located<int64_t> numHeads, numHeadChannels;
  Located<double> mlpRatio;
  Located<AttnMode> attnMode;
  Located<int64_t> windowSize;
  Located<PeMode> peMode;
  Located<bool> useFp16, useCheckpoint, qkRmsNorm;
  SourcePos representationPos;
  std::variant<GaussianRepresentation, RadianceFieldRepresentation,
               MeshRepresentation>
      representation;

  int64_t headDim() const { return *modelChannels / *numHeads; }
  int64_t mlpHidden() const;
  /// Channels of out_layer: 14·G (Gaussians), R·3·D + R + 3R (radiance
  /// field), 53 or 101 (mesh, with colour).
  int64_t outChannels() const;
  const GaussianRepresentation *gaussian() const {
    return std::get_if<GaussianRepresentation>(&representation);
  }
  const RadianceFieldRepresentation *radianceField() const {
    return std::get_if<RadianceFieldRepresentation>(&representation);
  }
  const MeshRepresentation *mesh() const {
    return std::get_if<MeshRepresentation>(&representation);
  }
};

/// One parsed sidecar.
struct ModelConfig {
  std::string file;
  Located<std::string> name;
  ModelKind kind = ModelKind::SparseStructureFlow;
  bool elastic = false;
  SourcePos argsPos;
  std::variant<SparseStructureFlowArgs, SparseStructureDecoderArgs,
               SLatFlowArgs, SLatDecoderArgs>
      args;
  std::vector<Diagnostic> warnings;

  const SparseStructureFlowArgs *ssFlow() const {
    return std::get_if<SparseStructureFlowArgs>(&args);
  }
  const SparseStructureDecoderArgs *ssDecoder() const {
    return std::get_if<SparseStructureDecoderArgs>(&args);
  }
  const SLatFlowArgs *slatFlow() const {
    return std::get_if<SLatFlowArgs>(&args);
  }
  const SLatDecoderArgs *slatDecoder() const {
    return std::get_if<SLatDecoderArgs>(&args);
  }
};

/// Validates a parsed sidecar document. On failure the message lists every
/// error found, one per line; `diagnostics` (optional) receives the
/// structured records, warnings included.
Result<ModelConfig>
parseModelConfig(const JsonDocument &doc,
                 std::vector<Diagnostic> *diagnostics = nullptr);
/// Same, from text (`file` names it in messages).
Result<ModelConfig>
parseModelConfig(std::string_view text, const std::string &file,
                 std::vector<Diagnostic> *diagnostics = nullptr);
/// Same, from a file.
Result<ModelConfig>
readModelConfig(const std::string &path,
                std::vector<Diagnostic> *diagnostics = nullptr);

} // namespace trellis::config

#endif // TRELLIS_CONFIG_MODELCONFIG_H
