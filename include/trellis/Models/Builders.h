//===- Builders.h - The TRELLIS model builders ------------------*- C++ -*-===//
//
// Each builder traces one network as a func.func of trellis IR, driven only
// by its sidecar args (spec §4–§7). Weight names are TRELLIS's state-dict
// names; the tracer checks each against the checkpoint header.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_MODELS_BUILDERS_H
#define TRELLIS_MODELS_BUILDERS_H

#include "trellis/Config/ImageCondConfig.h"
#include "trellis/Config/ModelConfig.h"
#include "trellis/Config/PipelineConfig.h"
#include "trellis/Format/Safetensors.h"
#include "trellis/Trace/Tracer.h"

#include <map>
#include <memory>
#include <string>

namespace trellis::models {

/// Static sizes a compile fixes.
struct TraceSizes {
  int64_t batch = 1;      // samples B
  int64_t condTokens = 0; // Lc (1374 image, 77 text)
};

/// func @name(x [B,Cin,R,R,R] f32, τ [B] f32, cond [B,Lc,Cc] f32)
///   -> v [B,Cout,R,R,R] f32                                    (spec §4)
void buildSparseStructureFlow(trace::Tracer &t, const std::string &name,
                              const config::SparseStructureFlowArgs &args,
                              const TraceSizes &sizes);

/// func @name(z [B,Cl,R,R,R] f32) -> logits [B,Cout,R',R',R'] f32 (spec §5)
void buildSparseStructureDecoder(trace::Tracer &t, const std::string &name,
                                 const config::SparseStructureDecoderArgs &args,
                                 int64_t latentResolution,
                                 const TraceSizes &sizes);

/// func @name(coords, x [N,Cin] f32, τ [B] f32, cond [B,Lc,Cc] f32)
///   -> v [N,Cout] f32                                          (spec §6)
void buildSLatFlow(trace::Tracer &t, const std::string &name,
                   const config::SLatFlowArgs &args, const TraceSizes &sizes);

/// func @name(coords, feats [N,Cl] f32) -> raw head output (spec §7):
/// Gaussian / radiance field: [N, out] f32; mesh: (coords at 4R, [64N, 101]).
void buildSLatDecoder(trace::Tracer &t, const std::string &name,
                      const config::SLatDecoderArgs &args,
                      const TraceSizes &sizes);

/// func @name(image [N,3,S,S] f32) -> cond [N, 1+R+G², C] f32: the
/// image-conditioning model (image conditioning spec §2), N images.
void buildImageCondModel(trace::Tracer &t, const std::string &name,
                         const config::ImageCondArgs &args, int64_t images);

/// Upper bound of the voxel count of a coordinate set at `resolution`.
int64_t voxelBound(int64_t resolution, const TraceSizes &sizes);

/// What a pipeline compile fixes besides the configs.
struct PipelineOptions {
  int64_t batch = 1;      // samples B
  int64_t images = 1;     // rows of cond (N_img; 1 unless multi-image)
  int64_t condTokens = 0; // Lc; 0 = the pipeline class's (1374 / 77)
  std::string multiImage = "none";
  config::SamplerOverrides ssOverrides, slatOverrides;
  /// The image-conditioning model, when the model directory has one: the
  /// program then also exports image_stage.
  std::optional<config::ImageCondArgs> imageCond;
};

/// The stage functions a pipeline program exports, in run order. Each takes
/// and returns plain tensors (coordinates as [N, 4] i32), so the runtime
/// can run any suffix of them (e.g. from given coordinates):
///   ss_stage(cond, noise [B,8,R,R,R])          -> (latent, coords)
///   slat_stage(coords, cond, noise [N,8])      -> slat [N,8] (de-normalized)
///   decode_gs(coords, slat)   -> (_xyz, _features_dc, _scaling, _rotation,
///                                 _opacity)   (spec §7.2 stored fields)
///   decode_rf(coords, slat)   -> (trivec, density, features_dc) (§7.3)
///   decode_mesh(coords, slat) -> (coords at 4R, fields [64N, 101]) (§7.4)
/// Text pipelines take neg_cond after cond (CLIP("") is not zeros).
/// With an image-conditioning model, first:
///   image_stage(image [N,3,S,S] normalized) -> cond [N, Lc, C]
inline constexpr const char *kStageFunctions[] = {"image_stage", "ss_stage",
                                                  "slat_stage",  "decode_gs",
                                                  "decode_rf",   "decode_mesh"};

/// The model key of the image-conditioning model's function and weights.
inline constexpr const char *kImageCondModelKey = "image_cond_model";

/// Checks every traced weight against the mapped checkpoints `files` (model
/// key -> safetensors) and makes a mismatch name the config values that imply
/// the expected shape (each model's manifest). Call before buildPipeline.
void bindCheckpoints(
    trace::Tracer &t, const config::PipelineConfig &pipeline,
    std::map<std::string, std::shared_ptr<const SafetensorsFile>> files);

/// Traces every model of the pipeline and the stage functions. Errors are
/// the tracer's (t.errors()).
void buildPipeline(trace::Tracer &t, const config::PipelineConfig &pipeline,
                   const PipelineOptions &options);

} // namespace trellis::models

#endif // TRELLIS_MODELS_BUILDERS_H
