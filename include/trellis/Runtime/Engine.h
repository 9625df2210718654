//===- Engine.h - The pipeline, set up once, run many times -----*- C++ -*-===//
//
// An Engine is what lives across generations: the parsed program, the backend
// (CUDA context, loaded modules, staged weights, planned memory, built
// commands and captured graphs — kept by the GPU executor per entry function,
// and for the sparse stages per voxel set), and the output writer thread.
// Each run() is one generation: conditioning (+ seed or noise) in, tensors
// and files out.
//
//   made once           Engine::create: weights checked against the program,
//                       backend started, dense stages prepared (GPU)
//   per voxel set       the sparse stages' binding (coordinate values, plan,
//                       commands), kept while the set is unchanged
//   per generation      noise, the stages' launches, downloads, output files
//
// Rules: one generation at a time per engine (a second concurrent run() fails
// with EngineBusy instead of racing); an engine is bound to one device
// (GpuOptions::device), so two GPUs are two engines. The LoadedBundle passed
// to create() must outlive the engine.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_ENGINE_H
#define TRELLIS_RUNTIME_ENGINE_H

#include "trellis/Runtime/MemoryBudget.h"
#include "trellis/Runtime/OutputWriter.h"
#include "trellis/Runtime/Runner.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace trellis {

/// What stays fixed for an engine's life.
struct EngineOptions {
  /// Backend choice and GPU options (device, lowMemory, graphs, ...).
  GpuRunOptions gpu;
  /// Stop at the first op producing NaN/Inf, naming it.
  bool checkFinite = false;
  /// Where the checkpoints come from: a provider, else the model directory.
  WeightProvider weights;
  std::string modelDir;
  /// One-line notices while starting (e.g. "no usable GPU: ...").
  std::function<void(const std::string &)> notice;
  /// The last stage any run of this engine reaches (1: sparse structure,
  /// 2: structured latent, 3: decoders): setup checks only those stages'
  /// checkpoints, so `--stop-after ss` needs only the stage-1 models.
  int lastStage = 3;
  /// Runs will take images (--image): the image-conditioning model's
  /// checkpoint is checked at setup too.
  bool images = false;
  /// The voxel count the device memory plan assumes for the sparse stages
  /// (trellis/Runtime/MemoryBudget.h); a generation whose stage 1 finds more
  /// is planned again, for its count, before its stage 2.
  int64_t memoryPlanVoxels = 32768;
  /// Calibration of an FP8 program (trellis.exe --calibrate;
  /// trellis/Runtime/Fp8Calibration.h): told every FP8 linear's input amax.
  Fp8Observer fp8Observer;
};

/// One generation's inputs and what to produce.
struct GenerationRequest {
  NamedTensor cond; // f32 [images, Lc, Cc]
  /// Instead of `cond`: the preprocessed, normalized images f32 [N, 3, S, S]
  /// (trellis/Image/Preprocess.h), which the program's image_stage (the
  /// image-conditioning model) turns into the conditioning tokens.
  std::optional<NamedTensor> images;
  /// Also write cond_tokens.npy: the conditioning tokens the run used, and
  /// cond_image.npy: `condImages` when set (u8 [N, S, S, 3], the images as
  /// preprocessed).
  bool saveCond = false;
  std::optional<HostTensor> condImages;
  std::optional<NamedTensor> negCond; // text pipelines
  std::optional<NamedTensor> ssNoise, slatNoise, coords;
  uint64_t seed = 42;
  bool gs = true, rf = true, mesh = true;
  /// FlexiCubes on the CPU even when the mesh decoder ran on the GPU.
  bool meshOnCpu = false;
  SamplerRunOverrides ss, slat;
  /// With `coords`: run stage 1 anyway and continue with `coords` instead
  /// of its voxels (benchmarks: a whole generation's cost on a chosen voxel
  /// set, e.g. a surface-like one where synthetic weights give a scattered
  /// stage 1).
  bool stage1WithCoords = false;
  /// Stop after stage 1 (sparse structure) or 2 (structured latent).
  int lastStage = 3;
  /// If set, the output files go here (created).
  std::string outDir;
  /// Return the mesh decoder's raw fields (PipelineResult::meshFields,
  /// 0.2-0.5 GB at image-large). Off: on the GPU they stay on the device,
  /// where FlexiCubes reads them, and meshFields stays empty.
  bool keepMeshFields = true;
  /// Also write the debug outputs: mesh_fields.npz (the mesh decoder's raw
  /// fields) and print the mesh report (manifoldness, components).
  bool debugOutputs = false;
  /// Return before this generation's files are written (trellis.exe's batch
  /// mode: the next generation computes meanwhile); collect the outcome with
  /// Engine::finishWrites(stats). Otherwise run() returns after the files.
  /// Either way a generation that fails leaves no file: run() waits for the
  /// files it queued and removes them before returning the error.
  bool asyncWrites = false;
};

/// Where one generation's time went.
struct GenerationStats {
  double wallSeconds = 0;  // run() from entry to return
  double stageSeconds = 0; // the stage functions' calls, summed
  double gpuSeconds = 0;   // GPU time of the stages and FlexiCubes (events)
  /// Host work of the GPU stages: staging weights, planning (a sparse stage's
  /// binding to a new voxel set), building commands, downloading results.
  double setupSeconds = 0, downloadSeconds = 0;
  int64_t voxels = 0;
  uint64_t writeTicket = 0; // for finishWrites (asyncWrites)
  /// Every file the generation handed to the writer (full paths): a failed
  /// generation removes them, so it leaves no output at all.
  std::vector<std::string> files;
};

class Engine {
public:
  /// Checks every weight the program reads (present, dtype, shape; such
  /// errors start with "weights: "), starts the backend and prepares what
  /// does not depend on the inputs.
  static Result<std::unique_ptr<Engine>> create(const LoadedBundle &bundle,
                                                EngineOptions options);
  ~Engine();
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;

  /// Runs one generation. Fails with a message starting "engine busy" while
  /// another thread is inside run() of the same engine.
  Result<PipelineResult> run(const GenerationRequest &request,
                             PipelineObserver *observer = nullptr);
  /// The statistics of the last successful run().
  const GenerationStats &lastStats() const { return stats_; }
  /// Waits for the files of the runs up to `ticket` (GenerationStats) and
  /// returns the first write error among them.
  Status finishWrites(uint64_t ticket) { return writer_.wait(ticket); }
  /// The same for the run that `stats` describes (with asyncWrites); when a
  /// write failed, that run's files are removed (none of it is left).
  Status finishWrites(const GenerationStats &stats);
  Status finishWrites() { return writer_.drain(); }

  /// "cuda" or "cpu": where entry function `name` runs.
  const char *backend(const std::string &name) const;
  /// The device memory form the engine runs in ("default",
  /// "sequential-branches", "low-memory"; empty without a GPU) and its plan.
  const std::string &memoryForm() const { return memory_.form; }
  const PipelineMemoryPlan &memoryPlan() const { return memory_; }
  const GpuReport *gpuReport() const { return session_->gpuReport(); }
  const LoadedBundle &bundle() const { return bundle_; }

private:
  Engine(const LoadedBundle &bundle, std::unique_ptr<Session> session,
         int lastStage);
  /// Plans the GPU stages' memory for `voxels` and takes the fastest form
  /// that fits the executor's budget (never a faster one than the current);
  /// an error names what does not fit.
  Status fitMemoryBudget(int64_t voxels);

  const LoadedBundle &bundle_;
  int lastStage_;
  std::unique_ptr<Session> session_;
  PipelineMemoryRequest memoryRequest_; // the GPU functions a run calls
  PipelineMemoryPlan memory_;           // the form taken, for memory_.voxels
  std::function<void(const std::string &)> notice_;
  OutputWriter writer_;
  GenerationStats stats_;
  std::atomic<bool> busy_{false};
};

/// Where the timed GEMM picks are kept across processes by default
/// (GpuOptions::gemmTuningCache): $TRELLIS_CACHE_DIR/gemm-tuning.json, else
/// $XDG_CACHE_HOME/trellis/..., else ~/.cache/trellis/...; empty without any.
std::string defaultGemmTuningCache();

/// The pipeline stage (0 to 3) an entry function belongs to: image_stage 0,
/// ss_stage 1, slat_stage 2, the decoders 3.
int pipelineStageOf(const std::string &function);

/// Checks that `weights` has every tensor the functions of stages 1 up to
/// `lastStage` read (and image_stage's with `images`), with the dtype and
/// shape they expect; the error names the model, tensor, expected and found.
Status checkProgramWeights(const Program &program,
                           const WeightProvider &weights, int lastStage = 3,
                           bool images = false);

} // namespace trellis

#endif // TRELLIS_RUNTIME_ENGINE_H
