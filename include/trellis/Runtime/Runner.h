//===- Runner.h - The TRELLIS pipeline run as a library ---------*- C++ -*-===//
//
// What trellis.exe does between reading its inputs and exiting, as a library
// shared by the command line (runtime/app/App.cpp) and the C ABI
// (libtrellis_rt.so, include/trellis/trellis_rt.h):
//
//   LoadedBundle   a parsed bundle: program, location table, meta, weights
//   Session        runs entry functions of a program: the ONE place that
//                  picks the backend (CUDA executor or CPU reference) per
//                  entry function
//   PipelineResult / PipelineObserver
//                  what a generation produces and how it reports progress
//                  (the pipeline itself: Engine.h)
//
// No exceptions, no printing: errors are Status/Result, messages go to the
// observer.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_RUNNER_H
#define TRELLIS_RUNTIME_RUNNER_H

#include "trellis/Runtime/Bundle.h"
#include "trellis/Runtime/CpuExecutor.h"
#include "trellis/Runtime/GpuExecutor.h"
#include "trellis/Runtime/Program.h"

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace trellis {

/// A bundle with its sections parsed.
struct LoadedBundle {
  Bundle bundle;
  Program program;
  nlohmann::json meta;    // the "meta" section ({} when absent)
  nlohmann::json weights; // the "weights" section: model key -> checkpoint
  std::string source;     // where it came from (error messages)

  /// From a bundle file, or (`embedded`) the bundle appended to an executable.
  static Result<LoadedBundle> load(const std::string &path, bool embedded);
  /// From bundle bytes in memory; `what` names them in messages.
  static Result<LoadedBundle> fromBytes(std::string_view bytes,
                                        const std::string &what);
};

/// Weights from the checkpoints a bundle's weight manifest names, relative to
/// model directory `modelDir`. Each tensor is an owned copy made with checked
/// reads (SafetensorsFile::load): a checkpoint truncated or rewritten while
/// it is open is an error naming the file and the tensor, never a SIGBUS.
/// With `shapes`, that is set to a provider over the same opened files whose
/// tensors are views into the mappings: for checking dtypes and shapes
/// (checkProgramWeights) without reading the bytes; nothing may read the
/// data of its tensors.
WeightProvider modelDirectoryWeights(const nlohmann::json &manifest,
                                     const std::string &modelDir,
                                     WeightProvider *shapes = nullptr);

/// Where the bundle's GPU functions run: on the GPU when one is usable, else
/// on the CPU reference with a notice (Auto); always on the CPU (Off); on the
/// GPU or not at all (Require).
enum class GpuMode { Auto, Off, Require };

struct GpuRunOptions {
  GpuMode mode = GpuMode::Auto;
  GpuOptions options;
};

/// The device images and GPU entry functions a bundle carries (sections
/// ptx.sm_90a, ptx.compute_75, attn.*; meta "gpu_entries").
struct BundleGpuCode {
  GpuImages images;
  std::vector<std::string> entries;
  static BundleGpuCode from(const LoadedBundle &bundle);
};

/// How a Session runs the program.
struct SessionOptions {
  GpuRunOptions gpu;
  BundleGpuCode gpuCode;
  /// One-line notices (e.g. "no usable GPU: running on the CPU").
  std::function<void(const std::string &)> notice;
  bool checkFinite = false;
  /// Per entry function (e.g. "ss_stage"): sampler overrides.
  std::map<std::string, SamplerRunOverrides> samplerOverrides;
  StepCallback onStep;
  /// Calibration of an FP8 program (trellis.exe --calibrate), on either
  /// backend; empty: off.
  Fp8Observer fp8Observer;
};

/// Runs entry functions of one program with one weight binding.
class Session {
public:
  Session(const Program &program, WeightProvider weights,
          const SessionOptions &options);
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  /// Replaces the sampler overrides (per entry function) and the step
  /// callback for the following calls (a generation's settings).
  void setRunHooks(const std::map<std::string, SamplerRunOverrides> &overrides,
                   StepCallback onStep);
  /// Runs entry function `name` on `args` (checked against its types).
  /// On the GPU, results flagged in `deviceOnly` stay there (no data on the
  /// host; GpuExecutor::run); the CPU ignores the flags. `io`: arguments and
  /// results in device memory (GpuExecutor's DeviceIo); on the CPU, device
  /// arguments are an error and every result comes back to the host.
  Result<std::vector<RtValue>>
  call(const std::string &name, std::vector<RtValue> args,
       const std::vector<bool> *deviceOnly = nullptr, DeviceIo *io = nullptr);
  /// Starts the host part of preparing GPU entry `name` for `args` on
  /// another thread (GpuExecutor::prepareInBackground); nothing on the CPU.
  void prepareInBackground(const std::string &name, std::vector<RtValue> args);
  /// The backend that runs entry `name`: "cuda" or "cpu".
  const char *backend(const std::string &name) const;
  /// Why the GPU executor could not start (empty when it did, or was not
  /// asked for).
  const std::string &gpuUnavailable() const { return gpuUnavailable_; }
  /// The GPU executor's report (null when the GPU is not used).
  const GpuReport *gpuReport() const;
  /// The GPU executor (null when the GPU is not used), for work outside the
  /// program such as FlexiCubes.
  GpuExecutor *gpuExecutor() { return gpu_.get(); }

private:
  std::unique_ptr<CpuExecutor> exec_;
  std::unique_ptr<GpuExecutor> gpu_;
  std::vector<std::string> gpuEntries_;
  std::string gpuUnavailable_; // why gpu_ is null (GpuMode::Require fails)
  GpuMode gpuMode_ = GpuMode::Auto;
};

/// An input tensor and how messages name it ("--cond cond.npy").
struct NamedTensor {
  HostTensor tensor;
  std::string what;
};

/// Everything the pipeline produced (tensors are owned or views that the
/// result keeps alive). Per-sample splitting happens only in the files.
struct PipelineResult {
  HostTensor ssLatent; // [B, 8, R, R, R] (undefined when coords were given)
  HostTensor coords;   // int32 [N, 4]
  HostTensor slat;     // [N, 8]
  bool hasGs = false, hasRf = false, hasMesh = false;
  // decode_gs: xyz, features_dc, scaling, rotation, opacity (all samples).
  HostTensor gsXyz, gsFeaturesDc, gsScaling, gsRotation, gsOpacity;
  // decode_rf: trivec, density, features_dc (rows of coords).
  HostTensor rfTrivec, rfDensity, rfFeaturesDc;
  int rfResolution = 0;
  // decode_mesh: candidate cubes and fields; the extracted mesh (first
  // sample; empty when no surface).
  HostTensor meshCubes, meshFields, meshVertices, meshFaces;
  /// The conditioning tokens the image-conditioning model made (runs with
  /// images only).
  HostTensor cond;
};

/// Receives progress. Every method has a default that does nothing.
class PipelineObserver {
public:
  virtual ~PipelineObserver();
  /// A stage function starts ("ss_stage", "1/3 sparse structure").
  virtual void stageBegin(const std::string &function,
                          const std::string &title) {}
  virtual void stageEnd(const std::string &function, const std::string &title,
                        double seconds) {}
  /// One sampler step k of n inside `function`.
  virtual void step(const std::string &function, int64_t k, int64_t n) {}
  /// Stage 1's coordinates, as soon as they exist (int32 [N, 4]).
  virtual void coords(const HostTensor &coords) {}
  /// A human-readable line (what trellis.exe prints on stderr).
  virtual void message(const std::string &line) {}
  /// Asked after every sampler step: true stops the generation there with
  /// the error "cancelled" (a server's DELETE of a running job).
  virtual bool cancelled() const { return false; }
};

/// Checks an input against the entry function's argument type:
/// "<what> is [1, 5, 128] F32, the compiled program expects …".
Status expectInputType(const HostTensor &t, const ValueType &type,
                       const std::string &what);

} // namespace trellis

#endif // TRELLIS_RUNTIME_RUNNER_H
