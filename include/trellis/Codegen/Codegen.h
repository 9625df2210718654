//===- Codegen.h - Generated GPU kernels of CUDA functions ------*- C++ -*-===//
//
// The codegen phase of --target=cuda (docs/design/gpu-backend.md): every op of
// a function marked `trellis.device = "cuda"` is classified (library GEMM or
// attention, conv, view, sampler, host, generated); the generated ops get one
// `gpu.func` each (deduplicated by op name, types and attributes) in a
// separate module, which is lowered gpu → NVVM → LLVM NVPTX to PTX. The ops
// are annotated in place with `trellis.launch` (generated ops, the im2col of
// conv3d, the neighbour gather of a 3×3×3 sparse.conv3d),
// `trellis.scratch_bytes` (both convs), `trellis.tap_sum` and
// `trellis.taps_scratch_bytes` (the sparse conv's taps-first sum),
// `trellis.window_rows` (an attention over Swin windows: its row gathers and
// scatter) and `trellis.update` (flow_sample). The sm_90a PTX is also assembled
// into a cubin where the toolkit has ptxas.
//
// Kernel parameters are raw device pointers, operands in op order then
// results (the sampler update kernel also takes strength, dt, guided). Shapes
// are static and baked in. Generated kernels use 16-byte vector accesses
// where the innermost size allows, so every buffer must be 16-byte aligned.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_CODEGEN_CODEGEN_H
#define TRELLIS_CODEGEN_CODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mlir {
class Pass;
} // namespace mlir

namespace trellis::codegen {

struct CodegenOptions {
  /// Also produce compute_75 PTX (the portable section); not for kernels
  /// that store E4M3 (an FP8 program's, which runs on sm_90 only).
  bool portablePtx = true;
  /// CUDA toolkit whose nvvm/libdevice/libdevice.10.bc is linked (math
  /// functions). Empty: $CUDA_ROOT, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda.
  std::string cudaPath;
  /// Also assemble the sm_90a PTX into a cubin with that toolkit's ptxas
  /// (when it has one), so that loading the kernels on Hopper needs no JIT
  /// compilation (measured: 2.4 s at the first load of the image-large
  /// kernels on an H100, against 1.0 s of ptxas here).
  bool cubin = true;
  /// With `cubin`: also assemble the compute_75 PTX for these consumer and
  /// Ampere/Ada architectures, so that those cards load SASS instead of
  /// JIT-compiling the PTX at their first run (measured: 2.7 s for the tiny
  /// program's modules, cached by the driver afterwards). ~0.66 MB each at
  /// image-large; the assemblies run in parallel.
  std::vector<std::string> sassArchs = {"sm_75", "sm_80", "sm_86", "sm_89"};
};

struct GeneratedKernels {
  std::string ptxSm90a;     ///< PTX text, `.target sm_90a`
  std::string ptxCompute75; ///< PTX text, `.target sm_75`; empty if not asked
  /// ptxas's cubin of ptxSm90a; empty without CodegenOptions::cubin or when
  /// the toolkit has no ptxas (the driver then JIT-compiles the PTX).
  std::string cubinSm90a;
  /// ptxas's cubins of ptxCompute75 by architecture ("sm_86" -> ELF), for
  /// CodegenOptions::sassArchs.
  std::map<std::string, std::string> cubinsPortable;
  int numKernels = 0; ///< distinct kernels (same names in all)
};

/// The result of assembling PTX with the CUDA toolkit's ptxas.
struct PtxasResult {
  bool found = false; ///< the toolkit has a ptxas
  std::string cubin;  ///< the object, when it assembled
  std::string error;  ///< ptxas's exit status and log, when it failed
};

/// Assembles `ptx` for `arch` (e.g. "sm_90a") with `<toolkit>/bin/ptxas`,
/// the toolkit found as for CodegenOptions::cudaPath. An empty `ptx` only
/// looks for ptxas (`found`).
PtxasResult assembleWithPtxas(llvm::StringRef ptx, llvm::StringRef arch,
                              llvm::StringRef cudaPath = "");

/// Classifies and annotates the ops of every CUDA function of `module` and
/// lowers the generated kernels to PTX. Fails with a diagnostic at the op's
/// location when an op of a CUDA function has no GPU implementation.
mlir::FailureOr<GeneratedKernels>
generateKernels(mlir::ModuleOp module, const CodegenOptions &options);

/// The kernels' module before lowering (gpu.module @trellis_kernels), built
/// and annotated as generateKernels does, without lowering. For tests and
/// `trellis-gpu-codegen{dump-kernels}`.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildKernelModule(mlir::ModuleOp module);

} // namespace trellis::codegen

#endif // TRELLIS_CODEGEN_CODEGEN_H
