//===- Lowering.cpp - gpu.module → NVVM → LLVM NVPTX → PTX ----------------===//
//
// The upstream pipeline (shared/TOOLCHAIN.md), in process:
//   gpu.module(convert-scf-to-cf,
//              convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv
//              index-bitwidth=32}, reconcile-unrealized-casts),
//   gpu-module-to-binary{format=isa}
// with the targets attached directly (the equivalent of nvvm-attach-target):
// sm_90a and sm_75, both PTX 8.0 (CUDA 13's ptxas accepts it for either).
// libdevice (math functions) is linked by the NVVM serializer from the CUDA
// toolkit it finds.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/CodegenInternal.h"

#include "trellis/Codegen/Codegen.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

namespace trellis::codegen {

PtxasResult assembleWithPtxas(StringRef ptx, StringRef arch,
                              StringRef cudaPath) {
  PtxasResult result;
  llvm::SmallString<256> ptxas(detail::cudaToolkit(cudaPath));
  llvm::sys::path::append(ptxas, "bin", "ptxas");
  if (!llvm::sys::fs::can_execute(ptxas))
    return result;
  result.found = true;
  if (ptx.empty()) // only looking for ptxas
    return result;
  llvm::SmallString<128> in, out, log;
  if (llvm::sys::fs::createTemporaryFile("trellis-kernels", "ptx", in) ||
      llvm::sys::fs::createTemporaryFile("trellis-kernels", "cubin", out) ||
      llvm::sys::fs::createTemporaryFile("trellis-kernels", "log", log)) {
    result.error = "cannot create temporary files for ptxas";
    return result;
  }
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(in, ec);
    os << ptx;
  }
  std::string archArg = ("-arch=" + arch).str();
  llvm::SmallVector<StringRef> args = {ptxas, archArg, "-O3", in, "-o", out};
  std::optional<StringRef> redirects[] = {std::nullopt, log.str(), log.str()};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects,
                                     /*SecondsToWait=*/0, /*MemoryLimit=*/0,
                                     &message);
  if (rc != 0) {
    result.error = (ptxas + " -arch=" + arch).str() + " failed (exit " +
                   std::to_string(rc) +
                   (message.empty() ? "" : ", " + message) + ")";
    if (auto buf = llvm::MemoryBuffer::getFile(log))
      result.error += ": " + (*buf)->getBuffer().str();
  } else if (auto buf = llvm::MemoryBuffer::getFile(out, /*IsText=*/false)) {
    result.cubin = (*buf)->getBuffer().str();
  } else {
    result.error = "ptxas wrote no " + out.str().str();
  }
  for (const auto &f : {in, out, log})
    llvm::sys::fs::remove(f);
  return result;
}

} // namespace trellis::codegen

namespace trellis::codegen::detail {

void registerLoweringDependencies(DialectRegistry &registry) {
  registry.insert<gpu::GPUDialect, LLVM::LLVMDialect, NVVM::NVVMDialect>();
  // The ConvertToLLVM interfaces of arith, math, memref, vector, ... that
  // convert-gpu-to-nvvm collects.
  registerAllExtensions(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
}

namespace {} // namespace

std::string cudaToolkit(StringRef option) {
  if (!option.empty())
    return option.str();
  for (const char *var : {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"})
    if (const char *v = std::getenv(var); v && *v)
      return v;
  return "/usr/local/cuda";
}

LogicalResult lowerToPtx(ModuleOp kernels, bool portable, StringRef cudaPath,
                         std::string &ptxSm90a, std::string &ptxSm75) {
  MLIRContext *ctx = kernels.getContext();
  DialectRegistry registry;
  registerLoweringDependencies(registry);
  ctx->appendDialectRegistry(registry);
  ctx->loadDialect<gpu::GPUDialect, LLVM::LLVMDialect, NVVM::NVVMDialect>();

  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();

  SmallVector<Attribute> targets = {NVVM::NVVMTargetAttr::get(
      ctx, /*optLevel=*/3, "nvptx64-nvidia-cuda", "sm_90a", "+ptx80")};
  if (portable)
    targets.push_back(NVVM::NVVMTargetAttr::get(
        ctx, /*optLevel=*/3, "nvptx64-nvidia-cuda", "sm_75", "+ptx80"));
  for (auto m : kernels.getOps<gpu::GPUModuleOp>())
    m.setTargetsAttr(ArrayAttr::get(ctx, targets));

  PassManager pm(ctx, ModuleOp::getOperationName());
  OpPassManager &gm = pm.nest<gpu::GPUModuleOp>();
  gm.addPass(createSCFToControlFlowPass());
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.useBarePtrCallConv = true;
  nvvm.indexBitwidth = 32;
  gm.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  gm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions bin;
  bin.compilationTarget = "isa";
  const std::string toolkit = cudaToolkit(cudaPath);
  bin.toolkitPath = toolkit;
  pm.addPass(createGpuModuleToBinaryPass(bin));
  if (failed(pm.run(kernels)))
    return emitError(kernels.getLoc())
           << "lowering the generated kernels to PTX failed";

  ptxSm90a.clear();
  ptxSm75.clear();
  for (auto binary : kernels.getOps<gpu::BinaryOp>()) {
    for (Attribute a : binary.getObjects()) {
      auto object = cast<gpu::ObjectAttr>(a);
      auto target = dyn_cast<NVVM::NVVMTargetAttr>(object.getTarget());
      if (!target)
        continue;
      std::string text = object.getObject().getValue().str();
      // The serializer's assembly may carry a trailing NUL; the bundle adds
      // its own.
      while (!text.empty() && text.back() == '\0')
        text.pop_back();
      if (target.getChip() == "sm_90a")
        ptxSm90a = std::move(text);
      else if (target.getChip() == "sm_75")
        ptxSm75 = std::move(text);
    }
  }
  // A math function left as an extern means libdevice was not linked: the
  // module would not load.
  for (const std::string *ptx : {&ptxSm90a, &ptxSm75})
    if (StringRef(*ptx).contains(".extern .func"))
      return emitError(kernels.getLoc())
             << "the generated kernels call libdevice functions but " << toolkit
             << "/nvvm/libdevice/libdevice.10.bc was not linked (set "
                "CodegenOptions::cudaPath or $CUDA_HOME)";
  if (ptxSm90a.empty() || (portable && ptxSm75.empty()))
    return emitError(kernels.getLoc())
           << "the PTX of the generated kernels is missing after lowering";
  return success();
}

} // namespace trellis::codegen::detail
