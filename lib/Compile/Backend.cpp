//===- Backend.cpp - The phases after the trace, shared -------------------===//
#include "lib/Compile/Backend.h"

#include "lib/Compile/PipelineFront.h"
#include "lib/Target/HostProgram.h"
#include "trellis/Conversion/Partition.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>

namespace trellis {
/// The attention kernel images compiled at build time (runtime/kernels,
/// cmake/EmbedFiles.cmake); empty when built without the CUDA toolkit.
std::string_view embeddedImage(std::string_view name);
} // namespace trellis

namespace trellis::compile {

void addPhasePasses(Phase phase, mlir::PassManager &pm,
                    const BackendOptions &options) {
  switch (phase) {
  case Phase::Graph:
    addGraphPhasePasses(pm, options.fp8ScalesFile);
    break;
  case Phase::Fusion:
    mlir::trellis::buildFusionPipeline(pm);
    break;
  case Phase::Tiling:
    mlir::trellis::buildTilingPipeline(pm, options.tiling);
    break;
  default:
    break;
  }
}

mlir::LogicalResult runPhase(Phase phase, mlir::ModuleOp module,
                             const BackendOptions &options,
                             codegen::GeneratedKernels &kernels) {
  if (phase == Phase::Partition)
    return partitionForCuda(module, options.gpuEntries);
  if (phase == Phase::Codegen) {
    mlir::FailureOr<codegen::GeneratedKernels> generated =
        codegen::generateKernels(module, codegen::CodegenOptions());
    if (mlir::failed(generated))
      return mlir::failure();
    kernels = std::move(*generated);
    return mlir::success();
  }
  mlir::PassManager pm(module.getContext());
  if (options.passManagerCommandLine &&
      mlir::failed(mlir::applyPassManagerCLOptions(pm)))
    return module.emitError("invalid pass manager options");
  addPhasePasses(phase, pm, options);
  return pm.run(module);
}

bool cudaTargetAvailable() { return !embeddedImage("attn_sm_90a").empty(); }

mlir::LogicalResult
runPhases(mlir::ModuleOp module, Phase after, Phase last,
          const BackendOptions &options, codegen::GeneratedKernels &kernels,
          llvm::function_ref<mlir::LogicalResult(Phase)> afterEach) {
  for (const PhaseInfo &info : allPhases()) {
    if (info.phase <= after || info.phase > last ||
        !info.appliesTo(options.target))
      continue;
    if (mlir::failed(runPhase(info.phase, module, options, kernels)) ||
        (afterEach && mlir::failed(afterEach(info.phase))))
      return mlir::failure();
  }
  return mlir::success();
}

Result<Bundle> assembleBundle(mlir::ModuleOp module, Target target,
                              const BundleContents &contents,
                              const codegen::GeneratedKernels &kernels) {
  mlir::FailureOr<SerializedProgram> program =
      serializeHostProgram(module, contents.entries);
  if (mlir::failed(program))
    return Error{"the host program could not be written (see the errors "
                 "above)"};
  Bundle bundle;
  bundle.set("program", std::move(program->program));
  bundle.set("locations", std::move(program->locations));
  bundle.set("weights", contents.weightManifest);
  nlohmann::json meta = {{"compiler", contents.compiler},
                         {"target", target == Target::CUDA ? "cuda" : "cpu"},
                         {"input", contents.inputName}};
  if (target == Target::CUDA) {
    // The GPU entries are the functions partition marked.
    nlohmann::json entries = nlohmann::json::array();
    for (const std::string &e : contents.entries)
      if (auto fn = module.lookupSymbol<mlir::func::FuncOp>(e);
          fn && fn->hasAttr("trellis.device"))
        entries.push_back(e);
    meta["gpu_entries"] = entries;
    meta["generated_kernels"] = kernels.numKernels;
    bundle.set("ptx.sm_90a", kernels.ptxSm90a);
    if (!kernels.cubinSm90a.empty())
      bundle.set("cubin.sm_90a", kernels.cubinSm90a);
    if (!kernels.ptxCompute75.empty())
      bundle.set("ptx.compute_75", kernels.ptxCompute75);
    for (const auto &[arch, cubin] : kernels.cubinsPortable)
      bundle.set("cubin." + arch, cubin);
    for (const char *image :
         {"attn.sm_90a", "attn.compute_80", "attn.compute_75", "attn.sm_75",
          "attn.sm_80", "attn.sm_86", "attn.sm_89"}) {
      std::string key = image;
      std::replace(key.begin(), key.end(), '.', '_');
      std::string_view bytes = embeddedImage(key);
      if (bytes.empty())
        return Error{"this trellisc was built without the attention kernels "
                     "(no CUDA toolkit at build time): --target=cuda is "
                     "unavailable"};
      // NUL-terminated: the driver reads PTX as a C string.
      bundle.set(image, std::string(bytes) + '\0');
    }
  }
  for (const auto &[key, value] : contents.extraMeta.items())
    meta[key] = value;
  // (Paths need not be UTF-8: replace what JSON cannot hold.)
  bundle.set("meta", meta.dump(-1, ' ', false,
                               nlohmann::json::error_handler_t::replace));
  return bundle;
}

} // namespace trellis::compile
