//===- Pass.cpp - trellis-gpu-codegen -------------------------------------===//
//
// Runs the codegen on a module (declared in dialect/BackendPasses.td). The
// module is annotated in place; `dump-kernels` prints the kernels' gpu.module
// before lowering, `ptx-out=FILE` writes the sm_90a PTX.
//
//===----------------------------------------------------------------------===//
#include "trellis/Codegen/Codegen.h"

#include "dialect/BackendPasses.h"
#include "lib/Codegen/CodegenInternal.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace mlir::trellis {
#define GEN_PASS_DEF_TRELLISGPUCODEGEN
#include "dialect/BackendPasses.h.inc"
} // namespace mlir::trellis

namespace trellis::codegen {
namespace {

struct GpuCodegenPass
    : public mlir::trellis::impl::TrellisGpuCodegenBase<GpuCodegenPass> {
  using TrellisGpuCodegenBase::TrellisGpuCodegenBase;

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
    if (failed(detail::lowerToPtx(*k->module, portable && !k->storesE4M3,
                                  cudaPath, sm90, sm75)))
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
};

} // namespace
} // namespace trellis::codegen
