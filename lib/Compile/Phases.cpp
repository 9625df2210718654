//===- Phases.cpp - The named compile phases of trellisc ------------------===//
#include "lib/Compile/Phases.h"

#include "llvm/ADT/STLExtras.h"

namespace trellis {

// {phase, name, summary, built for CUDA, built for CPU, GPU only, MLIR out}
static constexpr PhaseInfo kPhases[] = {
    {Phase::Config, "config",
     "parse and validate pipeline.json and the checkpoint sidecars", true, true,
     false, false},
    {Phase::Trace, "trace",
     "run the TRELLIS model builders: trellis IR of every model and stage",
     true, true, false, true},
    {Phase::Trellis, "trellis",
     "lower the trace to the trellis dialect (tensor level, source locations)",
     true, true, false, true},
    {Phase::Graph, "graph", "graph passes: canonicalize, CSE, location check",
     true, true, false, true},
    {Phase::Fusion, "fusion",
     "specialize guidance, hoist cond-only work out of the sampler, fold "
     "zero conditioning, fuse LayerNorm+modulation, GEMM activations, "
     "attention head norms, GEMM residuals, residual+LayerNorm",
     true, false, true, true},
    {Phase::Tiling, "tiling",
     "chunk the MLPs over tokens (when asked for), choose every attention "
     "op's kernel tiles per GPU family",
     true, false, true, true},
    {Phase::Partition, "partition",
     "mark the GPU functions; rewrite ops into cuBLASLt / attention / "
     "generated-kernel forms",
     true, false, true, true},
    {Phase::Codegen, "codegen",
     "generated kernels to PTX (gpu -> NVVM -> LLVM NVPTX), sm_90a + "
     "compute_75",
     true, false, true, true},
    {Phase::Plan, "plan",
     "build the host program (device memory is planned by the runtime at "
     "load, from the static shapes)",
     true, true, false, true},
    {Phase::Bundle, "bundle",
     "write the versioned bundle and link it with the runtime (trellis.exe)",
     true, true, false, false},
};

llvm::ArrayRef<PhaseInfo> allPhases() { return kPhases; }

const PhaseInfo &getPhaseInfo(Phase phase) {
  return kPhases[static_cast<int>(phase)];
}

std::optional<Phase> parsePhase(llvm::StringRef name) {
  for (const PhaseInfo &info : kPhases)
    if (info.name == name)
      return info.phase;
  return std::nullopt;
}

} // namespace trellis
