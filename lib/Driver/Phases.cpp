//===- Phases.cpp - The named compile phases of trellisc --------------------===//
#include "lib/Driver/Phases.h"

#include "llvm/ADT/STLExtras.h"

namespace trellis {

// {phase, name, summary, built for CUDA, built for CPU, GPU only, MLIR out}
static constexpr PhaseInfo kPhases[] = {
    {Phase::Config, "config",
     "parse and validate pipeline.json and the checkpoint sidecars", true,
     true, false, false},
    {Phase::Trace, "trace",
     "run the TRELLIS model builders: trellis IR of every model and stage",
     true, true, false, true},
    {Phase::Trellis, "trellis",
     "lower the trace to the trellis dialect (tensor level, source locations)",
     true, true, false, true},
    {Phase::Graph, "graph",
     "graph passes: canonicalize, CSE, location check (hoisting and CFG "
     "batching to come)",
     true, true, false, true},
    {Phase::Fusion, "fusion",
     "fuse attention, LayerNorm+modulation, GEMM epilogues, CFG+Euler update",
     false, false, true, true},
    {Phase::Tiling, "tiling",
     "tile flash attention, Swin-3D windows into varlen attention, MLP "
     "chunking",
     false, false, true, true},
    {Phase::Partition, "partition",
     "split into cuBLASLt calls, attention kernels and generated kernels",
     false, false, true, true},
    {Phase::Codegen, "codegen",
     "compile generated kernels to PTX (gpu -> NVVM -> LLVM NVPTX)", false,
     false, true, true},
    {Phase::Plan, "plan",
     "plan memory (symbolic in the voxel count) and build the host program",
     false, true, false, true},
    {Phase::Bundle, "bundle",
     "write the versioned bundle and link it with the runtime (trellis.exe)",
     false, true, false, false},
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
