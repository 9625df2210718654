//===- Phases.h - The named compile phases ----------------------*- C++ -*-===//
//
// DESIGN.md §2: the compiler is a sequence of named phases, and
// `--compile-to=PHASE` stops after any of them (IREE style). This table is
// the single description of them: --help, the error for a phase that is not
// built yet, and docs/ARCHITECTURE.md all follow it.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_LIB_COMPILE_PHASES_H
#define TRELLIS_LIB_COMPILE_PHASES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace trellis {

enum class Phase {
  Config,    // pipeline.json + sidecars parsed and validated
  Trace,     // model builders ran: trace IR of every model and the sampler
  Trellis,   // trace lowered to the `trellis` dialect (tensor level)
  Graph,     // graph passes: canonicalize/CSE, hoisting, folding, CFG batching
  Fusion,    // attention formation, norm+modulate, GEMM epilogues, Euler/CFG
  Tiling,    // attention kernel tiles per GPU family, MLP token chunks
  Partition, // library calls (cuBLASLt, attention) vs generated kernels
  Codegen,   // generated kernels -> gpu -> NVVM -> LLVM NVPTX -> PTX
  Plan,      // memory plan (symbolic in N) and host program
  Bundle,    // versioned bundle (+ runtime = trellis.exe)
};

enum class Target { CUDA, CPU };

struct PhaseInfo {
  Phase phase;
  llvm::StringRef name;
  llvm::StringRef summary;
  /// False while the phase is not built yet for that target: reaching it is
  /// an error that says so (never a silent skip).
  bool builtForCUDA;
  bool builtForCPU;
  /// GPU-only phases (fusion .. codegen) do not apply to the CPU target: the
  /// reference backend runs trellis ops as they are.
  bool gpuOnly;
  /// The phase's output is MLIR (printable with --emit=mlir).
  bool producesMLIR;

  bool appliesTo(Target t) const { return !(gpuOnly && t == Target::CPU); }
  bool builtFor(Target t) const {
    return t == Target::CPU ? builtForCPU : builtForCUDA;
  }
};

llvm::ArrayRef<PhaseInfo> allPhases();
const PhaseInfo &getPhaseInfo(Phase phase);
std::optional<Phase> parsePhase(llvm::StringRef name);

} // namespace trellis

#endif // TRELLIS_LIB_COMPILE_PHASES_H
