//===- Backend.h - The phases after the trace, shared -----------*- C++ -*-===//
//
// The back of one compile, shared by trellisc (lib/Driver) and
// libtrellisc.so (lib/CAPI) as lib/Compile/PipelineFront.h shares the front:
// each IR phase after the trace (graph, fusion, tiling, partition, codegen)
// and the bundle a compiled module becomes (program, locations, weights,
// meta and, for CUDA, the generated PTX and the attention kernel images).
// Diagnostics go to the MLIR context's handler, as the caller installed it.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_LIB_COMPILE_BACKEND_H
#define TRELLIS_LIB_COMPILE_BACKEND_H

#include "lib/Compile/Phases.h"
#include "lib/Transforms/Passes.h"
#include "trellis/Codegen/Codegen.h"
#include "trellis/Runtime/Bundle.h"
#include "trellis/Support/Result.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace trellis::compile {

/// What the phases after the trace depend on.
struct BackendOptions {
  Target target = Target::CPU;
  /// The functions partition marks for the GPU (with their callees): a
  /// program's entries (a pipeline's stages, and its networks when exported;
  /// an MLIR program's main).
  std::vector<std::string> gpuEntries;
  mlir::trellis::TilingOptions tiling;
  /// trellisc --fp8-scales: the calibration file whose activation scales
  /// the graph phase sets on the FP8 linears (trellis-apply-fp8-scales).
  std::string fp8ScalesFile;
  /// Apply MLIR's pass-manager command-line options (trellisc registers
  /// them; the C API does not).
  bool passManagerCommandLine = false;
};

/// The passes of IR phase `phase` (graph, fusion, tiling) added to `pm`;
/// nothing for the others.
void addPhasePasses(Phase phase, mlir::PassManager &pm,
                    const BackendOptions &options);

/// Runs phase `phase` on `module`: its passes, or partition and codegen
/// (which fills `kernels`). Errors are reported to the context.
mlir::LogicalResult runPhase(Phase phase, mlir::ModuleOp module,
                             const BackendOptions &options,
                             codegen::GeneratedKernels &kernels);

/// Whether this build can compile for CUDA (it embeds the attention kernel
/// images, built with the CUDA toolkit).
bool cudaTargetAvailable();

/// Runs the phases after `after` up to `last` that apply to options.target,
/// in order, calling `afterEach` (when given) after each; stops at the first
/// failure.
mlir::LogicalResult
runPhases(mlir::ModuleOp module, Phase after, Phase last,
          const BackendOptions &options, codegen::GeneratedKernels &kernels,
          llvm::function_ref<mlir::LogicalResult(Phase)> afterEach = nullptr);

/// What a bundle records besides the module's program.
struct BundleContents {
  std::vector<std::string> entries; ///< the exported functions, in order
  std::string weightManifest = "{}";
  std::string inputName; ///< the input file's name (meta "input")
  std::string compiler;  ///< "trellisc <version>"
  /// More meta keys (e.g. "slat_resolution").
  nlohmann::json extraMeta = nlohmann::json::object();
};

/// The bundle of a compiled `module` for `target` (with the CUDA target,
/// `kernels` from codegen and the attention kernel images).
Result<Bundle> assembleBundle(mlir::ModuleOp module, Target target,
                              const BundleContents &contents,
                              const codegen::GeneratedKernels &kernels);

} // namespace trellis::compile

#endif // TRELLIS_LIB_COMPILE_BACKEND_H
