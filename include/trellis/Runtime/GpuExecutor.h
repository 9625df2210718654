//===- GpuExecutor.h - Runs a host program's CUDA functions -----*- C++ -*-===//
//
// The CUDA backend of the runtime (docs/design/gpu-backend.md). For an entry
// function the compiler placed on the GPU it:
//   * inlines the call graph into one op tree (sampler bodies stay loops),
//   * plans one device arena from the static shapes (liveness, first-fit),
//   * stages the function's weights from the mapped safetensors to the device
//     in bounded chunks through a pinned buffer,
//   * resolves every op to a command: a generated PTX kernel (the compiler's
//     `trellis.launch` annotation), a cuBLASLt GEMM, the attention kernel, a
//     host op at the stage boundary (occupancy),
//   * runs the sampler loop on the host, each velocity evaluation a captured
//     CUDA graph.
// Launches, copies, synchronizations and cuBLASLt setup are checked (event
// bookkeeping and teardown are not); every failure names the op and its
// source location from the bundle's location table — an asynchronous fault
// the enclosing op, or with GpuOptions::syncEachOp the op itself. No CUDA
// library is linked: the driver and cuBLASLt are loaded at run time, so
// GpuExecutor::create fails with a reason (and the caller falls back to the
// CPU) where there is no GPU.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_GPUEXECUTOR_H
#define TRELLIS_RUNTIME_GPUEXECUTOR_H

#include "trellis/Mesh/FlexiCubes.h"
#include "trellis/Runtime/CpuExecutor.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace trellis {

struct GpuOptions {
  /// The CUDA device ordinal this executor runs on (one executor, one
  /// device: two GPUs are two executors).
  int device = 0;
  /// Capture each sampler body as a CUDA graph (off: eager launches).
  bool cudaGraphs = true;
  /// Run the code a consumer card (sm_75) runs, whatever this GPU is: the
  /// generated kernels' compute_75 PTX and the sm_75 mma.sync attention,
  /// both through the driver's JIT, and the paths that follow from them (no
  /// implicit-GEMM sparse conv). `--gpu-arch portable`.
  bool portable = false;
  /// Compare every op's result with the CPU reference on the same inputs
  /// (slow; implies eager launches). Fails on the first op whose relative L2
  /// error exceeds `checkTolerance`.
  bool checkOps = false;
  double checkTolerance = 2e-2;
  /// Wait for every op to finish (eager launches), so that an asynchronous
  /// GPU fault is reported with the op and its source location.
  bool syncEachOp = false;
  /// NaN/Inf check of every result (eager launches).
  bool checkFinite = false;
  /// Time every command with CUDA events (eager launches) and report the
  /// totals per op kind in GpuReport::profile.
  bool profile = false;
  /// Run the conditional and unconditional velocity of a guided step on two
  /// streams at once (the unconditional branch gets its own memory; off with
  /// lowMemory). On the H100 at image-large size: SLat stage (20k voxels)
  /// 714.8 vs 743.7 ms for 520 MiB more (the branches fill each other's
  /// attention wave tails); SS stage 513.3 vs 522.7 ms for 32 MiB more.
  bool concurrentBranches = true;
  /// Time cuBLASLt's candidate algorithms for each distinct GEMM when it is
  /// first built and keep the fastest. The candidates are the heuristic's
  /// ones without split-K, and only when its first has none: every output
  /// element is one CTA's K loop in the same k order whichever wins, so the
  /// pick changes the time, not the bits (checked on the H100: both stages'
  /// latents bit-identical with and without). Costs 0.2–0.8 s per stage at
  /// its first run (mostly loading the candidates' kernels), unless
  /// gemmTuningCache already holds the shapes.
  bool tuneGemms = true;
  /// A JSON file that keeps the tuned picks across processes, per device,
  /// cuBLASLt version and GEMM (read at creation, merged and rewritten after
  /// a run that timed new shapes; an unreadable file is ignored and
  /// replaced). Empty: none. A cached pick is one of the same split-K-free
  /// candidates, so it changes no bits either.
  std::string gemmTuningCache;
  /// Attention kernel configuration by name (runtime/kernels/attention.h),
  /// for benchmarks; empty: the measured default per head dim.
  std::string attentionConfig;
  /// Where attention's q/k head norms run: "q-fused" (k by a pre-pass into
  /// scratch, q in the kernel's prologue), "prepass" (both), "fused" (both in
  /// the kernel, repeated per query tile for k).
  std::string attentionNorms = "q-fused";
  /// The softmax of attention calls whose k is head-normalized: "fixed" (a
  /// reference per row fixed after the first key tile, bounded by the norms:
  /// no running maxima or rescaling; the CTAs where a P would overflow are
  /// recomputed online; runtime/kernels/attention_sm90.cuh, sm_90 only) or
  /// "online" (the running maximum everywhere).
  std::string attentionSoftmax = "fixed";
  /// Release a function's device weights and arena when its run ends.
  bool lowMemory = false;
  /// The most device memory the executor may allocate (weights, arenas,
  /// pools, workspaces, scratch; the CUDA context and kernel images come on
  /// top), in bytes; 0: what the device has free when the executor starts,
  /// less a reserve for the driver. A larger value is capped at that too.
  /// An allocation past it fails with a message naming the buffer and the
  /// bytes. `--memory-budget`; the planner that picks a form that fits is
  /// trellis/Runtime/MemoryBudget.h.
  size_t memoryBudget = 0;
  /// Pinned staging buffer for weight uploads (two halves, double-buffered).
  size_t stagingBytes = size_t(64) << 20;
};

/// The device code a bundle carries (sections of the same names).
struct GpuImages {
  std::string ptxSm90a;      // generated kernels, sm_90a
  std::string cubinSm90a;    // the same assembled by trellisc (may be empty)
  std::string ptxCompute75;  // generated kernels, portable PTX
  std::string attnSm90a;     // attention kernels, sm_90a cubin
  std::string attnCompute80; // attention kernels, PTX
  std::string attnCompute75; // attention kernels, PTX
  /// SASS of the portable code by SM (75, 80, 86, 89): the generated
  /// kernels (cubin.sm_XX, from ptxCompute75) and the attention kernels
  /// (attn.sm_XX, from attnCompute75 for 75, attnCompute80 otherwise). A
  /// card loads the one of its major version with the highest minor not
  /// above its own, else the PTX through the driver's JIT.
  std::map<int, std::string> cubinsGenerated, cubinsAttention;
};

/// What the last run did (for progress output and benchmarks).
struct GpuReport {
  std::string device;
  int computeCapability = 0; // 90 for sm_90
  /// The kernels loaded: "sm_90a", "sm_80" or "sm_75" (attention's family;
  /// the generated kernels' PTX or cubin goes with it).
  std::string codePath;
  /// How they were loaded: "sass sm_86" (a cubin of the bundle) or "ptx jit"
  /// (the driver compiled the PTX; cached under ~/.nv), per module.
  std::string generatedImage, attentionImage;
  size_t arenaBytes = 0, weightBytes = 0, constantBytes = 0;
  size_t deviceBytesInUse = 0; // cuMemGetInfo: total - free, after the run
  /// The device's free memory when the executor started (after the context
  /// and modules), the budget the executor allocates within
  /// (GpuOptions::memoryBudget), and the most it has had allocated at once.
  size_t deviceFreeAtStart = 0, memoryBudget = 0, peakBytesInUse = 0;
  size_t bytesInUse = 0;          // allocated by the executor now
  double weightUploadSeconds = 0; // of the last run (0: weights were resident)
  /// Host time of the setup phases (wall clock): the device modules loaded
  /// at initialization (the generated PTX is JIT-compiled by the driver
  /// there), and of the last run: planning the function (for a sparse stage
  /// its binding: the coordinate values evaluated on the host, the shapes,
  /// the arena plan) and building its commands (cuBLASLt setup and the
  /// GEMM candidate timing); both zero when the last run reused them.
  double moduleLoadSeconds = 0, planSeconds = 0, commandSeconds = 0;
  /// Of the last run: the constants and bound coordinate values copied to
  /// the device (zero when the last run reused them).
  double uploadSeconds = 0;
  /// Of the last run, when its function was made resident on another thread
  /// while earlier stages ran (GpuExecutor::prepareInBackground): that
  /// thread's weight staging, uploads and command building, off the critical
  /// path (the three fields above are then zero).
  double backgroundSetupSeconds = 0;
  double runSeconds = 0;      // the entry function, GPU events
  double downloadSeconds = 0; // the last run's results to the host (wall)
  int64_t commands = 0;       // per run, sampler bodies counted once per step
  int64_t checkedOps = 0;
  double worstCheckError = 0;
  std::string worstCheckOp;
  /// With GpuOptions::profile: per op kind (op name and kernel or GEMM
  /// shape), the number of commands and their summed GPU milliseconds.
  struct ProfileEntry {
    std::string what;
    int64_t count = 0;
    double ms = 0;
  };
  std::vector<ProfileEntry> profile;
  /// With GpuOptions::tuneGemms: one line per GEMM shape timed (the winning
  /// cuBLASLt candidate against the heuristic's first).
  std::vector<std::string> tunedGemms;
  /// The last extractFlexiCubes: GPU event times of the upload of coords
  /// and fields, the kernels (with the few count read-backs), the download.
  double flexiUploadMs = 0, flexiComputeMs = 0, flexiDownloadMs = 0;
};

/// The device memory an entry function needs (planned without a GPU).
struct GpuMemoryPlan {
  size_t arenaBytes = 0, weightBytes = 0, constantBytes = 0;
  size_t values = 0;     // slots with storage of their own in the arena
  size_t views = 0;      // reshapes and copy-free splits (no storage)
  size_t naiveBytes = 0; // the arena without reuse (sum of all values)
  /// What run() allocates beyond the pools above: the arena with its
  /// headroom (a sparse stage's, so that a similar voxel set reuses it), and
  /// a sparse stage's bound coordinate values (neighbour maps, windows, ...)
  /// with theirs.
  size_t arenaAllocated = 0, coordinateBytes = 0;
  /// Each result's bytes and shape (a sparse stage's for its voxels).
  std::vector<size_t> resultBytes;
  std::vector<Shape> resultShapes;
  size_t allocatedBytes() const {
    return arenaAllocated + weightBytes + constantBytes + coordinateBytes;
  }
};

/// Arguments and results of one run() in device memory (the C ABI's DLPack
/// path). An argument with a device pointer is copied on the device into its
/// slot (after the context's pending work, so a producer's stream has
/// finished writing it); its HostTensor gives only dtype and shape. A result
/// asked for on the device is copied into a buffer run() allocates, which
/// the caller frees with GpuExecutor::freeDeviceBuffer (valid while the
/// executor lives); its HostTensor comes back without data.
struct DeviceIo {
  std::vector<uint64_t> args;        ///< per argument: a CUdeviceptr, or 0
  std::vector<bool> resultsOnDevice; ///< per result
  std::vector<uint64_t> results;     ///< out: per result, the buffer or 0
};

class GpuExecutor {
public:
  /// Plans `function`'s device memory as run() would (inlining, views,
  /// liveness, first-fit), without a GPU, and checks the plan with an
  /// independent sweep: no two values that are alive at the same time share
  /// a byte. For `trellis.exe --inspect` and the tests. A sparse stage is
  /// planned for the voxels of `args` (its call's arguments: the bound
  /// coordinate values are computed on the host as run() does).
  static Result<GpuMemoryPlan>
  planMemory(const Program &program, const std::string &function,
             GpuOptions options = {},
             const std::vector<RtValue> *args = nullptr);
  /// The GEMM workspaces an executor with `options` allocates (one per
  /// stream, one for the setup's candidate timing).
  static size_t workspaceBytes(const GpuOptions &options);

  /// Loads the CUDA driver and cuBLASLt, creates the context and loads the
  /// modules. Fails (with the reason) when no usable GPU is present.
  static Result<std::unique_ptr<GpuExecutor>> create(const Program &program,
                                                     const GpuImages &images,
                                                     WeightProvider weights,
                                                     GpuOptions options);
  ~GpuExecutor();
  /// How many GPUs the driver reports; an error when there is no usable
  /// driver (or this runtime was built without the CUDA backend).
  static Result<int> deviceCount();

  /// Takes a form that needs less device memory: `lowMemory` (one stage's
  /// memory at a time) and/or the guidance branches one after the other
  /// (`concurrentBranches` false; true keeps what the options said). What
  /// earlier runs left resident is released and planned again at the next
  /// run. The memory planner's choice (trellis/Runtime/MemoryBudget.h).
  Status reduceMemoryForm(bool lowMemory, bool concurrentBranches);

  /// Whether `function` can run here (every op has a GPU command). The reason
  /// when not.
  Status supports(const std::string &function);
  void setSamplerOverrides(const std::string &function,
                           SamplerRunOverrides overrides);
  void setStepCallback(StepCallback callback);
  /// Calibration: every FP8 linear's input amax, reported after each run
  /// (the largest of its calls). Set before the first run.
  void setFp8Observer(Fp8Observer observer);
  /// Starts preparing sparse stage `function` for `args` on another thread:
  /// its binding to the voxel set (coordinate values, shapes, memory plan —
  /// host work) at once; then, once the next run() has built its own stage
  /// and launches it, making it resident (weights, uploads, commands) while
  /// that stage computes — except with lowMemory and the checking and
  /// profiling options. The next run() of `function` with the same
  /// coordinates takes it. Of the feature arguments only the shapes are
  /// read, so zero-filled tensors of those shapes will do.
  void prepareInBackground(const std::string &function,
                           std::vector<RtValue> args);

  /// Runs entry `name` on host arguments; results come back to the host,
  /// except those `deviceOnly` flags (by result index): they stay on the
  /// device until the next run and come back as tensors of the right dtype
  /// and shape without data (raw() == nullptr) — for a consumer that reads
  /// them in place (extractFlexiCubes), saving the download. Ignored with
  /// lowMemory (the arena is released after the run).
  Result<std::vector<RtValue>>
  run(const std::string &name, std::vector<RtValue> args,
      const std::vector<bool> *deviceOnly = nullptr, DeviceIo *io = nullptr);
  const GpuReport &report() const;
  /// Frees a result buffer of DeviceIo.
  Status freeDeviceBuffer(uint64_t buffer);
  /// Copies `bytes` of device memory at `buffer` to `host` (and waits).
  Status copyToHost(uint64_t buffer, void *host, size_t bytes);

  /// FlexiCubes extraction on the GPU (runtime/cuda/FlexiCubesGpu.cpp): the
  /// same mesh as mesh::extractFlexiCubes (vertex and face order, face
  /// indices, positions to float rounding of tanh/exp), from host inputs.
  /// When `fields` is a result of the last run() (the mesh decoder's) and its
  /// device memory is still held (no lowMemory), the extraction reads the
  /// device copy in place instead of uploading it again; a result that run()
  /// kept on the device (no data) must be read so.
  /// Resolutions up to 512 (dense bitmaps and a byte per cube on the GPU).
  Result<mesh::MeshResult> extractFlexiCubes(const HostTensor &coords,
                                             const HostTensor &fields,
                                             int resolution);

  struct Impl;

private:
  explicit GpuExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace trellis

#endif // TRELLIS_RUNTIME_GPUEXECUTOR_H
