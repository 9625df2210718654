//===- Manifest.h - The tensors each TRELLIS checkpoint must hold ---------===//
//
// For a parsed sidecar, the full list of tensors its `.safetensors` file must
// hold — name, shape, dtype — exactly as TRELLIS's module structure implies
// (spec Appendix A): every parameter and every persistent buffer (pos_emb,
// offset_perturbation), since TRELLIS loads with strict key matching.
//
// Dtype rule (spec §11/§1.5): with use_fp16, the weights and biases of the
// Linear / Conv / SparseConv modules inside the sub-modules the model
// converts (SS flow: blocks; SLat flow: input_blocks, blocks, out_blocks;
// SS decoder: middle_block, blocks; SLat decoders: blocks, plus upsample for
// the mesh decoder) are F16; everything else — norms, RMS gammas, the
// input/output/t-embedder layers, buffers — is F32.
//
// Each entry remembers which sidecar args determine its shape and dtype, so
// a mismatch with a checkpoint names the arg (and its file:line:col).
//
// This is the one source of truth for names/shapes/dtypes: trellis-mkmodel
// writes files from it and checkModelDirectory() checks files against it.
// Ordinary C++ (no LLVM headers).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_MODELS_MANIFEST_H
#define TRELLIS_MODELS_MANIFEST_H

#include "trellis/Config/ModelConfig.h"
#include "trellis/Config/PipelineConfig.h"
#include "trellis/Format/Safetensors.h"
#include "trellis/Support/DType.h"
#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Result.h"

#include <string>
#include <string_view>
#include <vector>

namespace trellis::models {

/// What a tensor is (also how trellis-mkmodel initializes it).
enum class TensorRole : uint8_t {
  LinearWeight,       // [out, in]
  LinearBias,         // [out]
  ConvWeight,         // dense Conv3d [out, in, k, k, k]
  ConvBias,           // [out]
  SparseConvWeight,   // spconv [out, k, k, k, in]
  SparseConvBias,     // [out]
  NormWeight,         // LayerNorm / ChannelLayerNorm / GroupNorm gamma [C]
  NormBias,           // beta [C]
  RmsGamma,           // MultiHeadRMSNorm gamma [H, d]
  PositionEmbedding,  // buffer pos_emb [(R/p)^3, C]: APE of the patch grid
  OffsetPerturbation, // buffer offset_perturbation [G, 3]
};

std::string_view tensorRoleName(TensorRole role);

/// A sidecar arg that shapes a tensor: "model_channels = 1024 (file:1:2)".
struct ArgRef {
  std::string name;  // "model_channels", "io_block_channels[0]"
  std::string value; // "1024"
  config::SourcePos pos;
  bool defaulted = false;

  std::string describe() const;
};

struct ManifestTensor {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  TensorRole role = TensorRole::LinearWeight;
  /// Inside a sub-module TRELLIS converts to fp16 (then dtype is F16 iff
  /// use_fp16).
  bool fp16Region = false;
  std::vector<ArgRef> shapeArgs;
  ArgRef dtypeArg; // use_fp16 for fp16-region tensors; empty otherwise

  int64_t numel() const { return numElements(shape); }
  uint64_t nbytes() const { return uint64_t(numel()) * dtypeSize(dtype); }
  /// Inputs per output of a weight (in, or in·k³); 0 for other roles.
  int64_t fanIn() const;
  /// "model_channels = 1024 (x.json:3:5), mlp_ratio = 4 (x.json:9:5)".
  std::string describeShapeArgs() const;
};

struct ModelManifest {
  std::string modelClass; // the sidecar's name
  config::ModelKind kind = config::ModelKind::SparseStructureFlow;
  std::string sidecar; // the sidecar file it was built from
  std::vector<ManifestTensor> tensors;

  /// The tensor called `name`, or null.
  const ManifestTensor *find(std::string_view name) const;
  int64_t numElements() const;
  uint64_t dataBytes() const;
  /// Name/dtype/shape for the safetensors writer, in manifest order.
  std::vector<TensorSpec> specs() const;
};

/// The tensors of a validated sidecar, in the module registration order of
/// spec Appendix A.
ModelManifest buildManifest(const config::ModelConfig &config);

/// Size in bytes of the .safetensors file the reference library writes for
/// these tensors (8 + padded header + data), computed from the specs alone.
Result<uint64_t> safetensorsFileSize(const ModelManifest &manifest);
/// The padded JSON header length of that file.
Result<uint64_t> safetensorsHeaderSize(const ModelManifest &manifest);

/// One disagreement between a model directory and its configs.
struct ModelProblem {
  enum class Kind {
    MissingWeightsFile,
    UnreadableWeightsFile,
    MissingTensor,
    UnexpectedTensor,
    WrongShape,
    WrongDType,
  };
  Kind kind;
  std::string modelKey; // "slat_flow_model"
  std::string file;     // the .safetensors file
  std::string tensor;   // empty for file-level problems
  std::string message;  // "file: tensor: expected ..., found ..."
};

struct ModelDirectoryReport {
  std::vector<ModelProblem> problems;
  size_t modelsChecked = 0;
  size_t tensorsChecked = 0;

  bool ok() const { return problems.empty(); }
  /// Every problem, one per line, then a summary line.
  std::string render() const;
  /// ok, or an Error carrying render().
  Status status() const;
};

/// Opens the .safetensors file of every model loadPipeline() parsed and
/// lists every missing, unexpected, wrong-shape and wrong-dtype tensor (all
/// of them, in manifest order, then the unexpected ones in file order).
/// Only headers are read.
ModelDirectoryReport
checkModelDirectory(const config::PipelineConfig &pipeline);

/// loadPipeline(path) + checkModelDirectory(): one Status listing every
/// config error or every weights problem.
Status validateModelDirectory(const std::string &path);

} // namespace trellis::models

#endif // TRELLIS_MODELS_MANIFEST_H
