//===- Pass.cpp - trellis-gpu-codegen -------------------------------------===//
//
// Runs the codegen on a module (registered by hand: dialect/Passes.td is the
// graph passes'). The module is annotated in place; `dump-kernels` prints the
// kernels' gpu.module before lowering, `ptx-out=FILE` writes the sm_90a PTX.
//
//===----------------------------------------------------------------------===//
#include "trellis/Codegen/Codegen.h"

#include "CodegenInternal.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace trellis::codegen {
namespace {

struct GpuCodegenPass
    : public PassWrapper<GpuCodegenPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GpuCodegenPass)

  GpuCodegenPass() = default;
  GpuCodegenPass(const GpuCodegenPass &other) : PassWrapper(other) {}

  StringRef getArgument() const override { return "trellis-gpu-codegen"; }
  StringRef getDescription() const override {
    return "Classify and annotate the ops of CUDA functions and generate "
           "their kernels as PTX (docs/design/gpu-backend.md)";
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    detail::registerLoweringDependencies(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<detail::KernelModule> k = detail::buildKernels(module);
    if (failed(k))
      return signalPassFailure();
    if (dumpKernels)
      k->module->print(llvm::outs());
    std::string sm90, sm75;
    if (failed(detail::lowerToPtx(*k->module, portable, cudaPath, sm90, sm75)))
      return signalPassFailure();
    if (!ptxOut.empty()) {
      std::string error;
      auto file = openOutputFile(ptxOut, &error);
      if (!file) {
        module.emitError() << "cannot write " << ptxOut << ": " << error;
        return signalPassFailure();
      }
      file->os() << sm90;
      file->keep();
    }
  }

  Option<std::string> ptxOut{*this, "ptx-out",
                             llvm::cl::desc("Write the sm_90a PTX to a file")};
  Option<bool> dumpKernels{
      *this, "dump-kernels",
      llvm::cl::desc("Print the kernels' module before lowering"),
      llvm::cl::init(false)};
  Option<std::string> cudaPath{
      *this, "cuda-path",
      llvm::cl::desc("CUDA toolkit with libdevice (default: $CUDA_ROOT, "
                     "$CUDA_HOME, $CUDA_PATH, /usr/local/cuda)")};
  Option<bool> portable{*this, "portable",
                        llvm::cl::desc("Also lower to compute_75 PTX"),
                        llvm::cl::init(true)};
};

} // namespace

void registerCodegenPasses() { PassRegistration<GpuCodegenPass>(); }

} // namespace trellis::codegen
