//===- PipelineFront.h - pipeline.json to traced IR, shared -----*- C++ -*-===//
//
// The front of one compile, shared by trellisc (lib/Driver) and libtrellisc.so
// (lib/CAPI): the config phase (pipeline.json and the checkpoint sidecars
// validated, the checkpoints opened), the trace phase (the TRELLIS model
// builders run into one module of stage functions), and the graph phase's
// passes. Diagnostics come back as the phases made them; each caller renders
// them its own way (trellisc prints them, the C API returns records).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_LIB_COMPILE_PIPELINEFRONT_H
#define TRELLIS_LIB_COMPILE_PIPELINEFRONT_H

#include "trellis/Config/PipelineConfig.h"
#include "trellis/Trace/Tracer.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trellis::compile {

/// What to trace (trellisc's pipeline options; the C API's options JSON).
struct PipelineRequest {
  std::string input; ///< the pipeline.json path
  /// Stop after the config phase: no checkpoint is opened, nothing traced.
  bool configOnly = false;
  bool allFp32 = false; ///< --precision=fp32
  /// --precision=fp8: the flow transformers' block linears in FP8 E4M3
  /// (Tracer::setFp8Linears).
  bool fp8Linears = false;
  int64_t batch = 1, condTokens = 0, images = 1;
  std::string multiImage;
  /// The image-conditioning model's folder (config.json + model.safetensors,
  /// Hugging Face's layout): "" = <pipeline dir>/image_cond_model when it
  /// has a config.json (then the program also takes images).
  std::string imageModelDir;
  /// Also export each network (the functions named by pipeline.json's model
  /// keys, e.g. sparse_structure_flow_model) as an entry of the program, to
  /// be called on its own (benchmarks, parity checks).
  bool exportNetworks = false;
};

/// What the config and trace phases produced, and their diagnostics.
struct PipelineFront {
  enum class Outcome { Ok, ConfigFailed, CheckpointFailed, TraceFailed };
  Outcome outcome = Outcome::Ok;
  /// Config phase: its diagnostics (warnings too) and, when loading failed,
  /// the message of the failure.
  std::vector<config::Diagnostic> configDiagnostics;
  std::string configError;
  std::optional<config::PipelineConfig> pipeline;
  /// A checkpoint that could not be opened: the model and the reason.
  const config::ModelRef *checkpointModel = nullptr;
  std::string checkpointError;
  /// Trace phase: the builders' errors (source and config positions).
  std::vector<trace::TraceError> traceErrors;
  /// The traced stage functions (null with configOnly or on failure).
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// The stage functions, in order (then the networks with exportNetworks).
  std::vector<std::string> entries;
  /// JSON: {"model key": "checkpoint path relative to the model dir"}.
  std::string weightManifest = "{}";
  /// Grid resolution of the structured latent (0 when none).
  int64_t slatResolution = 0;
  /// Every file the compile read: pipeline.json, each model's sidecar and
  /// checkpoint (an output must not replace one of them).
  std::vector<std::string> inputFiles;
};

/// The ranges of a request's numbers, as pipeline.json bounds its own: a
/// batch and a count of images of 1..64, conditioning tokens 1..16384 (0: the
/// model's default).
inline constexpr int64_t kMaxBatch = 64, kMaxImages = 64,
                         kMaxCondTokens = 16384;

/// How checkRequest names an option: trellisc's "--cond-tokens", the C
/// API's "cond_tokens".
enum class OptionNames { CommandLine, Json };

/// Why `request` cannot be traced (a number out of its range, the option
/// named), or "" when it can.
std::string checkRequest(const PipelineRequest &request, OptionNames names);

/// The config and trace phases of `request` into `context`.
PipelineFront tracePipeline(mlir::MLIRContext &context,
                            const PipelineRequest &request);

/// The graph phase's passes: canonicalize, CSE, the FP8 linears' static
/// activation scales from `fp8ScalesFile` (when not empty), the location
/// check.
void addGraphPhasePasses(mlir::PassManager &pm,
                         const std::string &fp8ScalesFile = {});

} // namespace trellis::compile

#endif // TRELLIS_LIB_COMPILE_PIPELINEFRONT_H
