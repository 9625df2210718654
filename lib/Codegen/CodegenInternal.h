//===- CodegenInternal.h - Shared between the codegen files -----*- C++ -*-===//
#ifndef TRELLIS_LIB_CODEGEN_CODEGENINTERNAL_H
#define TRELLIS_LIB_CODEGEN_CODEGENINTERNAL_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace trellis::codegen::detail {

struct KernelModule {
  mlir::OwningOpRef<mlir::ModuleOp> module; ///< gpu.container_module
  int numKernels = 0;
  /// Some kernel stores E4M3 (an FP8 program's, sm_89+): no sm_75 code.
  bool storesE4M3 = false;
};

/// Loads the dialects the kernel builders create ops of.
void loadKernelDialects(mlir::MLIRContext *ctx);

/// Classifies and annotates the ops of the CUDA functions of `module` and
/// builds their kernels (module { gpu.module @trellis_kernels }).
mlir::FailureOr<KernelModule> buildKernels(mlir::ModuleOp module);

/// Everything the lowering needs in a registry: dialects, conversion
/// interfaces, LLVM IR translations, the NVVM target attribute's model.
void registerLoweringDependencies(mlir::DialectRegistry &registry);

/// The CUDA toolkit to use: `option` (CodegenOptions::cudaPath), else
/// $CUDA_ROOT / $CUDA_HOME / $CUDA_PATH (lit and other launchers may not
/// pass it on), else /usr/local/cuda.
std::string cudaToolkit(llvm::StringRef option);

/// Lowers the kernels' module in place to PTX for sm_90a (and sm_75).
/// `cudaPath` as CodegenOptions::cudaPath.
mlir::LogicalResult lowerToPtx(mlir::ModuleOp kernels, bool portable,
                               llvm::StringRef cudaPath, std::string &ptxSm90a,
                               std::string &ptxSm75);

} // namespace trellis::codegen::detail

#endif // TRELLIS_LIB_CODEGEN_CODEGENINTERNAL_H
