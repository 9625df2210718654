//===- MkModel.h - Synthetic TRELLIS model directories --------------------===//
//
// trellis-mkmodel writes a complete TRELLIS-layout directory (pipeline.json,
// ckpts/<name>.json sidecars, ckpts/<name>.safetensors, cond.npy) with
// seeded random weights, so the compiler and the runtime can be exercised
// end to end without the real checkpoints.
//
// One source of truth: each sidecar is written, parsed back with the config
// library and turned into a manifest (trellis/Models/Manifest.h); the
// safetensors files are written from that manifest.
//
// The generator (portable, reproducible per tensor):
//   key(seed, ckpt, tensor) = mix64(fnv1a64(ckpt + "/" + tensor) ^ mix64(seed))
//   r_i = mix64(key + (i + 1) * 0x9E3779B97F4A7C15)    (element i; mix64 is
//         the splitmix64 finalizer, so r_i is the i-th splitmix64 output)
//   S_i = sum of the four 16-bit fields of r_i          (Irwin–Hall, n = 4)
//   z_i = (S_i − 131070) / sqrt(1431655765)             (mean 0, variance 1,
//         |z| <= 3.46); |z_i| < 0.01 becomes ±0.01, so no value is zero
// Only integer arithmetic and correctly rounded IEEE operations (sqrt, *,
// +) are involved, so every platform produces the same bits. Each tensor
// depends only on (seed, checkpoint, name), and element i only on i, so
// tensors stream through the safetensors writer one at a time.
//
// Scales (value = mean + std·z, rounded to the tensor's dtype):
//   Linear / Conv / SparseConv weights   std 1/sqrt(fan_in)  (fan_in = in·k³)
//   their biases                          std 0.02
//   norm and RMS gammas                   1 + 0.02·z
//   norm betas                            0.02·z
//   pos_emb, offset_perturbation          the real formulas (Buffers.h)
//   SS decoder out_layer.2.bias           ssDecoderOutputBias() (see there)
// cond.npy: z values of key(seed, "cond", "cond") reshaped [1, Lc, C], then
// each token normalized to zero mean and unit variance (like DINOv2's
// output after the affine-free LayerNorm).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_TOOLS_MKMODEL_MKMODEL_H
#define TRELLIS_TOOLS_MKMODEL_MKMODEL_H

#include "trellis/Config/ModelConfig.h"
#include "trellis/Format/Safetensors.h"
#include "trellis/Models/Manifest.h"
#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Result.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trellis::mkmodel {

//===----------------------------------------------------------------------===//
// Generator
//===----------------------------------------------------------------------===//

/// splitmix64's output function.
uint64_t mix64(uint64_t x);
/// FNV-1a, 64 bit.
uint64_t fnv1a64(std::string_view s);
/// The stream key of one tensor.
uint64_t tensorKey(uint64_t seed, std::string_view checkpoint,
                   std::string_view tensor);
/// Element `index` of the approximately standard normal stream `key`.
double syntheticNormal(uint64_t key, uint64_t index);

/// Target fraction of occupied voxels for random latents.
inline constexpr double kTargetOccupancy = 0.03;

/// The SS decoder's final conv bias. The final ChannelLayerNorm makes each
/// voxel's 32 (C) features zero-mean and unit-variance; treating them as
/// independent N(0, 1), a_c = SiLU(γ_c·n + β_c) has mean m1_c and variance
/// v_c (computed by quadrature), so the pre-bias logit of a voxel is about
/// N(μ, σ²) with μ = Σ w·m1_c and σ² = Σ w²·v_c over the conv's C·27
/// weights w. The bias −μ − Φ⁻¹(1 − q)·σ leaves a fraction q of the voxels
/// with a positive logit. `gamma`, `beta` [C] and `weight` [C·27] are the
/// generated out_layer.0 / out_layer.2 values.
double ssDecoderOutputBias(const std::vector<float> &gamma,
                           const std::vector<float> &beta,
                           const std::vector<float> &weight,
                           double occupancy = kTargetOccupancy);

/// Fills `dst` (t.nbytes(), in t.dtype) with the synthetic values of tensor
/// `t` of checkpoint `checkpoint` (its file stem, e.g.
/// "ss_flow_img_dit_L_16l8_fp16").
void fillTensor(const config::ModelConfig &config,
                const models::ModelManifest &manifest,
                const models::ManifestTensor &t, uint64_t seed,
                std::string_view checkpoint, void *dst);

/// The values fillTensor would write, as float (rounded through the dtype).
std::vector<float> tensorValues(const config::ModelConfig &config,
                                const models::ModelManifest &manifest,
                                const models::ManifestTensor &t, uint64_t seed,
                                std::string_view checkpoint);

/// [1, tokens, channels] f32, every token zero-mean and unit-variance.
HostTensor syntheticCond(uint64_t seed, std::string_view name, int64_t tokens,
                         int64_t channels);

//===----------------------------------------------------------------------===//
// Presets and directories
//===----------------------------------------------------------------------===//

enum class Preset { ImageLarge, TextBase, Tiny };

std::optional<Preset> parsePreset(std::string_view name);
std::string_view presetName(Preset p);

/// One checkpoint a preset writes.
struct CheckpointPlan {
  std::string key;       // "slat_flow_model"
  std::string modelPath; // as pipeline.json writes it
  /// Where its files go, relative to the output directory, without
  /// extension ("ckpts/x" or, for the text pipelines' decoders,
  /// "../TRELLIS-image-large/ckpts/x").
  std::string relativeBase;
  std::string sidecarJson;

  /// "ss_flow_img_dit_L_16l8_fp16".
  std::string stem() const;
};

struct PresetPlan {
  Preset preset;
  std::string pipelineJson;
  std::vector<CheckpointPlan> checkpoints;
  int64_t condTokens = 0, condChannels = 0;
  /// Text pipelines: also write neg_cond.npy (the encoding of "").
  bool writeNegCond = false;
};

PresetPlan planPreset(Preset preset);

/// The parsed sidecar and manifest of one checkpoint of a plan.
struct CheckpointModel {
  config::ModelConfig config;
  models::ModelManifest manifest;
};
Result<CheckpointModel> checkpointModel(const CheckpointPlan &plan);

struct Options {
  Preset preset = Preset::Tiny;
  uint64_t seed = 0;
  std::string outDir;
  bool force = false;
  /// Only these model keys (empty: all; "image_cond_model" names the
  /// image-conditioning model).
  std::vector<std::string> only;
  /// The checkpoints' headers only: each .safetensors file has its full size
  /// but its tensor data is a hole (reads as zeros, takes no disk), enough
  /// for trellisc, --inspect and the memory planner (the CI tests of
  /// image-large's plans), not for a run.
  bool layoutOnly = false;
  /// Progress lines ("" never); `sameLine` when the line may be redrawn.
  std::function<void(const std::string &line, bool sameLine)> progress;
};

struct WrittenFile {
  std::string path;
  uint64_t bytes = 0;
};

/// Writes the directory; returns the files written. Refuses to overwrite
/// existing files unless `force`.
Result<std::vector<WrittenFile>> writeModelDirectory(const Options &options);

/// The image-conditioning model an image preset writes (0 layers: none).
struct ImageCondModelPlan {
  int64_t hiddenSize = 0, layers = 0, heads = 0;
};
ImageCondModelPlan imageCondModelPlan(Preset preset);
/// Its config.json (Hugging Face's keys) and tensors (spec §3.2 names).
std::string imageCondConfigJson(const ImageCondModelPlan &plan);
std::vector<TensorSpec> imageCondTensors(const ImageCondModelPlan &plan);

/// Writes `dir`/config.json and `dir`/model.safetensors (seeded; with
/// `layoutOnly` its header and a hole, Options::layoutOnly).
Result<std::vector<WrittenFile>>
writeImageCondModel(const std::string &dir, const ImageCondModelPlan &plan,
                    uint64_t seed, bool layoutOnly = false);

/// A safetensors file with the header of `specs` and a hole where the data
/// goes (Options::layoutOnly).
Status writeSafetensorsLayout(const std::string &path,
                              const std::vector<TensorSpec> &specs);

} // namespace trellis::mkmodel

#endif // TRELLIS_TOOLS_MKMODEL_MKMODEL_H
