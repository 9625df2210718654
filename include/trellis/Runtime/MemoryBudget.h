//===- MemoryBudget.h - The pipeline's device memory, planned ---*- C++ -*-===//
//
// Before any work, the engine plans what a generation allocates on the GPU in
// each form the runtime can run it in, and takes the fastest that fits the
// memory budget (GpuOptions::memoryBudget, by default the device's free
// memory):
//
//   default              every stage's weights, arena and pools stay resident
//                        (the next generation only launches); the guidance
//                        branches of a sampler step run on two streams
//   sequential-branches  the same, the two branches one after the other (the
//                        second branch's arena and workspace are not needed)
//   low-memory           one stage's memory at a time: each stage's weights,
//                        arena and pools are released when it ends
//
// A stage's bytes are its GpuExecutor::planMemory plan: weights, the arena
// (with the headroom run() allocates), constants and, for a sparse stage, its
// bound coordinate values; a sparse stage is planned for a voxel bound (a
// surface-like set of that many voxels). FlexiCubes' buffers are an estimate
// per fine cube. When no form fits, the error names the stage that does not
// fit in the low-memory form and its bytes. No GPU is needed:
// `trellis.exe --inspect --memory-budget 6G` prints the plans.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_MEMORYBUDGET_H
#define TRELLIS_RUNTIME_MEMORYBUDGET_H

#include "trellis/Runtime/GpuExecutor.h"
#include "trellis/Runtime/Program.h"
#include "trellis/Support/Result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trellis {

/// What a generation runs on the GPU, for the plan.
struct PipelineMemoryRequest {
  /// The GPU entry functions a generation calls, in order (the bundle's
  /// gpu_entries up to the last stage: image_stage, ss_stage, slat_stage,
  /// decode_gs, decode_rf, decode_mesh).
  std::vector<std::string> functions;
  /// The voxels the sparse stages are planned for: a bound on stage 1's
  /// output (the default, 1/8 of the 64^3 grid, is above the 10-30k of real
  /// objects' surfaces).
  int64_t voxels = 32768;
  /// The sparse stages' grid (the bundle meta's slat_resolution): the
  /// planned set lies in it (all of it when `voxels` >= resolution^3).
  int resolution = 64;
  /// Instead: this voxel set (int32 [N, 4]; `voxels` is ignored).
  std::optional<HostTensor> coords;
  /// FlexiCubes runs on the GPU after decode_mesh (at 4 x resolution, the
  /// mesh decoder's grid).
  bool flexiCubes = true;
  /// The executor's options apart from the form (GEMM tuning takes a
  /// workspace of its own; the checking modes run the branches in turn).
  GpuOptions options;
};

/// One stage's device memory (GpuMemoryPlan::allocatedBytes).
struct StageMemory {
  std::string function;
  int64_t voxels = 0; // 0: a dense stage
  size_t weights = 0, arena = 0, constants = 0, coordinates = 0;
  /// The bytes held while the stage computes, beyond its own pools: the
  /// FlexiCubes step's estimate (its stage's row), 0 for the stages.
  size_t scratch = 0;
  size_t bytes() const {
    return weights + arena + constants + coordinates + scratch;
  }
};

/// One form's plan.
struct PipelineMemoryPlan {
  std::string form; // "default", "sequential-branches", "low-memory"
  bool lowMemory = false, concurrentBranches = true;
  int64_t voxels = 0;
  std::vector<StageMemory> stages; // the functions, then "flexicubes"
  size_t workspaces = 0;           // the GEMM workspaces
  /// The most the form holds at once: workspaces + the sum of the stages
  /// (resident forms) or + the largest stage (low-memory).
  size_t peak = 0;
  /// The stage that sets the low-memory form's peak.
  const StageMemory *largestStage() const;
};

/// Plans the request in every form, fastest first. Errors name the function
/// that could not be planned.
Result<std::vector<PipelineMemoryPlan>>
planPipelineMemory(const Program &program,
                   const PipelineMemoryRequest &request);

/// The first (fastest) plan whose peak fits `budget` bytes; when none does,
/// an error naming the low-memory form's largest stage, its bytes and the
/// budget.
Result<PipelineMemoryPlan>
chooseMemoryForm(const std::vector<PipelineMemoryPlan> &plans, size_t budget);

/// The plans as text (one line per form and stage), for --inspect and the
/// engine's notices.
std::string describeMemoryPlans(const std::vector<PipelineMemoryPlan> &plans,
                                size_t budget);

/// "6G", "6GiB", "4096M", "512MiB", "1.5G", "123" (bytes): binary units.
/// The error says what was expected.
Result<size_t> parseByteSize(const std::string &text);

/// Bytes as "1234 MiB" (rounded).
std::string formatMiB(size_t bytes);

/// A surface-like voxel set: int32 [n, 4] rows (0, x, y, z), the n voxels of
/// the res^3 grid closest to a sphere of radius 0.44·res, sorted (as
/// bench/slat_gpu/make_coords.py makes them).
HostTensor surfaceCoords(int64_t n, int res = 64);

/// Arguments for planning `fn` on `coords`: coords for the first int32
/// argument, zeros of the voxel count's rows for the others.
std::vector<RtValue> planArguments(const Function &fn,
                                   const HostTensor &coords);

} // namespace trellis

#endif // TRELLIS_RUNTIME_MEMORYBUDGET_H
