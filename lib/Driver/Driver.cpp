//===- Driver.cpp - The trellisc compiler driver --------------------------===//
//
// Reads a TRELLIS pipeline.json (or trellis-dialect MLIR), runs the compile
// phases up to --compile-to, and writes what --emit asks for.
//
//===----------------------------------------------------------------------===//
#include "trellis/Compiler/Driver.h"

#include "trellis/Codegen/Codegen.h"
#include "trellis/Conversion/Partition.h"

#include "dialect/TrellisDialect.h"
#include "lib/Compile/Backend.h"
#include "lib/Compile/Phases.h"
#include "lib/Compile/PipelineFront.h"
#include "lib/Target/HostProgram.h"
#include "lib/Transforms/Passes.h"
#include "trellis/Config/PipelineConfig.h"
#include "trellis/Format/Safetensors.h"
#include "trellis/Models/Builders.h"
#include "trellis/Models/Manifest.h"
#include "trellis/Runtime/Bundle.h"
#include "trellis/Support/NestingDepth.h"
#include "trellis/Trace/Tracer.h"

#include "mlir/IR/Verifier.h"
#include <nlohmann/json.hpp>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <algorithm>

using namespace mlir;
namespace cl = llvm::cl;

namespace trellis {
namespace {

/// The function a compiled program starts at.
constexpr llvm::StringLiteral kEntryFunction = "main";

enum class EmitKind { Default, MLIR, PTX, Bundle, Exe };

cl::OptionCategory category("trellisc options");
cl::OptionCategory debugCategory(
    "IR debugging options (MLIR's, e.g. --mlir-print-ir-after-all)");

/// Moves the useful MLIR debugging options into our help; libLLVM.so
/// registers thousands of others that --help hides.
void exposeMLIRDebugOptions() {
  static const char *const kPrefixes[] = {
      "mlir-print-ir-",        "mlir-print-debuginfo",
      "mlir-pretty-debuginfo", "mlir-timing",
      "mlir-pass-statistics",  "mlir-elide-elementsattrs",
      "mlir-print-op-generic", "mlir-disable-threading"};
  for (auto &entry : cl::getRegisteredOptions()) {
    llvm::StringRef name = entry.first;
    for (const char *prefix : kPrefixes)
      if (name.starts_with(prefix))
        entry.second->addCategory(debugCategory);
  }
}

cl::opt<std::string> inputFilename(
    cl::Positional, cl::Required, cl::cat(category),
    cl::desc("<pipeline.json | input.mlir>"),
    cl::value_desc("a TRELLIS pipeline.json, or IR in the trellis dialect"));

cl::opt<std::string> outputFilename(
    "o", cl::cat(category), cl::value_desc("file"),
    cl::desc("Output file (default: trellis.exe for --emit=exe, "
             "trellis.bundle for --emit=bundle, stdout otherwise)"));

std::string phaseHelp() {
  std::string help = "Stop after this phase and emit its result:";
  for (const PhaseInfo &info : allPhases())
    help += "\n    " + info.name.str() +
            std::string(11 - std::min<size_t>(10, info.name.size()), ' ') +
            info.summary.str() +
            (info.builtForCUDA  ? ""
             : info.builtForCPU ? " [built for --target=cpu]"
             : info.gpuOnly     ? " [GPU only; not built yet]"
                                : " [not built yet]");
  return help;
}

// cl::desc keeps a pointer: the text must outlive the option.
const std::string kPhaseHelp = phaseHelp();
cl::opt<std::string> compileTo("compile-to", cl::cat(category),
                               cl::value_desc("phase"), cl::init("bundle"),
                               cl::desc(kPhaseHelp));

cl::opt<EmitKind> emitKind(
    "emit", cl::cat(category), cl::init(EmitKind::Default),
    cl::desc("What to write (default: exe for a full compile, mlir when "
             "--compile-to names an IR phase)"),
    cl::values(
        clEnumValN(EmitKind::MLIR, "mlir", "the IR after the phase"),
        clEnumValN(EmitKind::PTX, "ptx", "the PTX of the generated kernels"),
        clEnumValN(EmitKind::Bundle, "bundle", "the versioned bundle alone"),
        clEnumValN(EmitKind::Exe, "exe",
                   "a standalone executable (runtime + bundle)")));

cl::opt<Target> target(
    "target", cl::cat(category), cl::init(Target::CUDA),
    cl::desc("Where the program runs"),
    cl::values(clEnumValN(Target::CUDA, "cuda",
                          "NVIDIA GPUs: sm_90a kernels plus portable PTX for "
                          "sm_75+ (falls back to the CPU when no GPU)"),
               clEnumValN(Target::CPU, "cpu", "the CPU reference backend")));

cl::OptionCategory pipelineCategory("pipeline options (pipeline.json input)");

cl::opt<int64_t> batchSize("batch", cl::cat(pipelineCategory), cl::init(1),
                           cl::desc("Samples generated per run (B)"));
cl::opt<int64_t> condTokens(
    "cond-tokens", cl::cat(pipelineCategory), cl::init(0),
    cl::desc("Conditioning tokens per image (Lc; default 1374 for image "
             "pipelines, 77 for text)"));
cl::opt<int64_t>
    numImages("images", cl::cat(pipelineCategory), cl::init(1),
              cl::desc("Conditioning images per run (rows of cond; >1 needs "
                       "--multi-image)"));
cl::opt<std::string> multiImage(
    "multi-image", cl::cat(pipelineCategory), cl::init("none"),
    cl::desc("How several images condition one sample: none, stochastic, "
             "multidiffusion (spec §2.3)"));

cl::opt<std::string> precision(
    "precision", cl::cat(pipelineCategory), cl::init("trellis"),
    cl::desc("trellis: fp16 where TRELLIS stores fp16 (spec §11); fp32: "
             "everything in f32 (a debugging aid, not TRELLIS's numbers); "
             "fp8: as trellis, with the flow transformers' block "
             "linears in FP8 E4M3 (W8A8, per-tensor scales; cuBLASLt's FP8 "
             "GEMM on sm_90, the CPU reference's exact emulation elsewhere)"));

cl::opt<std::string> fp8Scales(
    "fp8-scales", cl::cat(pipelineCategory), cl::value_desc("file"),
    cl::desc("With --precision=fp8: static activation scales, the file "
             "`trellis.exe --calibrate N` wrote (one per FP8 linear); "
             "without it each FP8 GEMM computes its input's scale at every "
             "call (docs/fp8.md)"));

cl::opt<std::string> imageModel(
    "image-model", cl::cat(pipelineCategory), cl::value_desc("dir"),
    cl::desc("The image-conditioning model (Hugging Face's "
             "dinov2-with-registers folder: config.json, model.safetensors); "
             "default <model dir>/image_cond_model when it exists. With it "
             "the program takes images (trellis.exe --image)"));

cl::opt<bool> exportNetworks(
    "export-networks", cl::cat(pipelineCategory), cl::init(false),
    cl::desc("Also make every network of the pipeline (e.g. "
             "sparse_structure_flow_model) an entry of the program, callable "
             "on its own through the C ABI (benchmarks, parity checks)"));

cl::opt<unsigned> mlpChunkTokens(
    "mlp-chunk-tokens", cl::cat(category), cl::init(0),
    cl::desc("GPU, tiling phase: run each MLP over this many tokens at a "
             "time (trellis-chunk-mlp; bounds the [L, 4C] hidden activation "
             "for small-memory GPUs; 0 = whole sequence)"));

cl::opt<unsigned> mlpHiddenMiB(
    "mlp-hidden-mib", cl::cat(category), cl::init(0),
    cl::desc("GPU, tiling phase: run each MLP over as many tokens as keep "
             "its hidden activation within this many MiB (with "
             "--mlp-chunk-tokens: the fewer tokens; 0 = no budget)"));

cl::opt<unsigned> tileForSms(
    "tile-for-sms", cl::cat(category), cl::init(132),
    cl::desc("GPU, tiling phase: the SMs the attention tiles of static "
             "sequence lengths are chosen for (132: H100 SXM and H200; "
             "lengths known only at run time are chosen on the device)"));

/// A usage error: exit code 2.
cl::opt<std::string> dumpPhasesTo(
    "dump-phases-to", cl::cat(debugCategory), cl::value_desc("dir"),
    cl::desc("Also write the IR after every phase this run reaches "
             "(NN-phase.mlir) and, after codegen, the generated PTX "
             "(kernels.sm_90a.ptx, kernels.compute_75.ptx) into this "
             "directory (created; files of the same names replaced)"));

int usageError(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "trellisc") << message << "\n";
  return 2;
}

/// A compile error: exit code 1.
int compileError(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "trellisc") << message << "\n";
  return 1;
}

/// The last phase reachable from `start` for `t` without a gap.
Phase lastReachablePhase(Phase start, Target t) {
  Phase last = start;
  for (const PhaseInfo &info : allPhases()) {
    if (info.phase <= start || !info.appliesTo(t))
      continue;
    if (!info.builtFor(t))
      break;
    last = info.phase;
  }
  return last;
}

/// Writes `text` to `dir`/`name` (--dump-phases-to).
LogicalResult dumpFile(llvm::StringRef dir, llvm::StringRef name,
                       llvm::function_ref<void(llvm::raw_ostream &)> write) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  std::string error;
  auto out = openOutputFile(path, &error);
  if (!out) {
    compileError("--dump-phases-to: " + error);
    return failure();
  }
  write(out->os());
  out->keep();
  return success();
}

/// The runtime executable that --emit=exe copies: $TRELLIS_RUNTIME, else
/// trellis-runtime next to this trellisc.
std::string findRuntime() {
  if (const char *env = std::getenv("TRELLIS_RUNTIME"))
    return env;
  std::string self = llvm::sys::fs::getMainExecutable(
      "trellisc", reinterpret_cast<void *>(&findRuntime));
  llvm::SmallString<256> path(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(path, "trellis-runtime");
  return std::string(path);
}

/// What the front phases produced besides the IR.
struct CompiledInput {
  std::vector<std::string> entries;
  /// JSON: {"model key": "checkpoint path relative to the model dir"}.
  std::string weightManifest = "{}";
  /// Grid resolution of the structured latent (0 when not a pipeline).
  int64_t slatResolution = 0;
  /// The files the compile read (the output must not replace one).
  std::vector<std::string> inputFiles;
};

/// Fails when the output path `out` names one of `inputs` or the runtime
/// that --emit=exe copies (the same file, links followed): -o must never
/// replace what the compile reads.
LogicalResult checkOutputIsNoInput(llvm::StringRef out,
                                   llvm::ArrayRef<std::string> inputs) {
  if (out.empty() || out == "-" || !llvm::sys::fs::exists(out))
    return success();
  std::vector<std::string> files(inputs.begin(), inputs.end());
  files.push_back(findRuntime());
  for (const std::string &in : files) {
    bool same = false;
    if (!llvm::sys::fs::equivalent(out, in, same) && same) {
      compileError("the output '" + out + "' is " +
                   (in == files.back() ? "the trellis runtime" : "the input") +
                   " '" + in + "': choose another -o path");
      return failure();
    }
  }
  return success();
}

/// Config + trace phases: pipeline.json → validated configs → the traced
/// pipeline (lib/Compile). Prints every error (config or trace) and returns
/// null on failure; stops after the config phase when asked to.
OwningOpRef<ModuleOp> tracePipeline(MLIRContext &context, Phase finalPhase,
                                    CompiledInput &out, int &exitCode) {
  using Outcome = compile::PipelineFront::Outcome;
  exitCode = 1;
  compile::PipelineRequest request;
  request.input = inputFilename;
  request.configOnly = finalPhase == Phase::Config;
  if (!request.configOnly && precision != "trellis" && precision != "fp32" &&
      precision != "fp8") {
    llvm::errs() << "trellisc: error: --precision must be 'trellis', 'fp32' "
                    "or 'fp8', found '"
                 << precision << "'\n";
    exitCode = 2;
    return nullptr;
  }
  if (!fp8Scales.empty() && precision != "fp8") {
    llvm::errs() << "trellisc: error: --fp8-scales needs --precision=fp8\n";
    exitCode = 2;
    return nullptr;
  }
  request.allFp32 = precision == "fp32";
  request.fp8Linears = precision == "fp8";
  request.batch = batchSize;
  request.condTokens = condTokens;
  request.images = numImages;
  request.multiImage = multiImage;
  request.imageModelDir = imageModel;
  request.exportNetworks = exportNetworks;
  if (std::string bad =
          compile::checkRequest(request, compile::OptionNames::CommandLine);
      !bad.empty()) {
    llvm::errs() << "trellisc: error: " << bad << "\n";
    exitCode = 2;
    return nullptr;
  }
  compile::PipelineFront front = compile::tracePipeline(context, request);
  for (const config::Diagnostic &d : front.configDiagnostics)
    if (d.severity == config::Diagnostic::Severity::Warning)
      llvm::errs() << d.render() << "\n";
  switch (front.outcome) {
  case Outcome::ConfigFailed:
    llvm::errs() << front.configError << "\n";
    return nullptr;
  case Outcome::CheckpointFailed:
    llvm::errs() << front.checkpointModel->path.pos.location()
                 << ": error: checkpoint of '" << front.checkpointModel->key
                 << "': " << front.checkpointError << "\n";
    return nullptr;
  case Outcome::TraceFailed:
    for (const trace::TraceError &e : front.traceErrors)
      llvm::errs() << e.render() << "\n";
    llvm::errs() << front.traceErrors.size() << " error(s) while tracing "
                 << inputFilename << "\n";
    return nullptr;
  case Outcome::Ok:
    break;
  }
  out.weightManifest = front.weightManifest;
  out.slatResolution = front.slatResolution;
  out.inputFiles = front.inputFiles;
  if (request.configOnly) {
    const config::PipelineConfig &pipeline = *front.pipeline;
    llvm::outs() << pipeline.file << ": "
                 << config::pipelineClassName(pipeline.pipelineClass) << ", "
                 << llvm::count_if(pipeline.models,
                                   [](const config::ModelRef &m) {
                                     return bool(m.config);
                                   })
                 << " models\n";
    for (const config::ModelRef &m : pipeline.models)
      if (m.config)
        llvm::outs() << "  " << m.key << ": " << *m.config->name << " ("
                     << m.sidecarPath() << ")\n";
    exitCode = 0;
    return nullptr;
  }
  out.entries = front.entries;
  if (failed(mlir::verify(*front.module)))
    return nullptr;
  exitCode = 0;
  return std::move(front.module);
}

/// The plan and bundle phases: serialize the host program and write the
/// bundle (alone or inside an executable). For CUDA the bundle also carries
/// the generated PTX and the attention kernel images.
int emitBundle(ModuleOp module, EmitKind emit, const CompiledInput &in,
               Target tgt, const codegen::GeneratedKernels &kernels) {
  compile::BundleContents contents;
  contents.entries = in.entries;
  contents.weightManifest = in.weightManifest;
  contents.inputName = llvm::sys::path::filename(inputFilename).str();
  contents.compiler = "trellisc " TRELLISC_VERSION;
  if (in.slatResolution)
    contents.extraMeta["slat_resolution"] = in.slatResolution;
  Result<Bundle> assembled =
      compile::assembleBundle(module, tgt, contents, kernels);
  if (!assembled)
    return compileError(assembled.message());
  Bundle &bundle = *assembled;
  std::string outPath = outputFilename;
  if (emit == EmitKind::Bundle) {
    if (outPath.empty())
      outPath = "trellis.bundle";
    if (Status s = bundle.writeFile(outPath); !s)
      return compileError(s.message());
    return 0;
  }
  if (outPath.empty())
    outPath = "trellis.exe";
  std::string runtime = findRuntime();
  if (!llvm::sys::fs::exists(runtime))
    return compileError("cannot find the trellis runtime at '" + runtime +
                        "' to build an executable (set TRELLIS_RUNTIME, or "
                        "use --emit=bundle)");
  if (Status s = bundle.writeExecutable(runtime, outPath); !s)
    return compileError(s.message());
  return 0;
}

/// What the command line asks for, checked before any work: the phases to
/// run and what to write.
struct CompilePlan {
  Phase start = Phase::Config; // the input's phase
  Phase finalPhase = Phase::Bundle;
  EmitKind emit = EmitKind::Default;
  Target tgt = Target::CPU;
};

/// --compile-to and the kind of input: where compilation ends and starts.
/// Returns the exit code of a usage error, 0 when they fit.
int planPhases(CompilePlan &plan) {
  std::optional<Phase> finalPhase = parsePhase(compileTo);
  if (!finalPhase) {
    std::string names;
    for (const PhaseInfo &info : allPhases())
      names += (names.empty() ? "" : ", ") + info.name.str();
    return usageError("unknown phase '" + compileTo +
                      "' for --compile-to; the phases are: " + names);
  }
  plan.finalPhase = *finalPhase;

  // The input decides where compilation starts.
  llvm::StringRef ext = llvm::sys::path::extension(inputFilename);
  if (ext == ".json")
    plan.start = Phase::Config;
  else if (ext == ".mlir")
    plan.start = Phase::Trellis;
  else
    return usageError("cannot tell the kind of input '" + inputFilename +
                      "': expected a pipeline.json (.json) or trellis IR "
                      "(.mlir)");
  if (plan.finalPhase < plan.start)
    return usageError("--compile-to=" + compileTo +
                      " comes before the input's "
                      "phase '" +
                      getPhaseInfo(plan.start).name + "': nothing to do");
  return 0;
}

/// --emit, its default taken from the final phase, checked against it.
/// Returns the exit code of a usage error, 0 when it fits.
int planEmit(CompilePlan &plan) {
  const PhaseInfo &final = getPhaseInfo(plan.finalPhase);
  plan.emit = emitKind;
  if (plan.emit == EmitKind::Default)
    plan.emit = final.producesMLIR ? EmitKind::MLIR : EmitKind::Exe;
  if (plan.finalPhase == Phase::Config)
    plan.emit = EmitKind::MLIR; // the config phase prints a summary
  else if (plan.emit == EmitKind::MLIR && !final.producesMLIR)
    return usageError("--emit=mlir needs an IR phase; '" + final.name +
                      "' does not produce MLIR");
  if (plan.emit == EmitKind::PTX && plan.finalPhase < Phase::Codegen)
    return usageError("--emit=ptx needs --compile-to=codegen or later");
  if ((plan.emit == EmitKind::Bundle || plan.emit == EmitKind::Exe) &&
      plan.finalPhase != Phase::Bundle)
    return usageError("--emit=bundle and --emit=exe need --compile-to=bundle");
  return 0;
}

/// Refuses up front, before any work, a final phase the target does not have
/// or a phase on the way that this build does not implement for it. Returns
/// the exit code, 0 when every phase is there.
int checkPhasesBuilt(const CompilePlan &plan) {
  const Target tgt = plan.tgt;
  const PhaseInfo &final = getPhaseInfo(plan.finalPhase);
  llvm::StringRef targetName = tgt == Target::CPU ? "cpu" : "cuda";
  if (!final.appliesTo(tgt))
    return usageError("phase '" + final.name +
                      "' exists only for GPU "
                      "targets; --target=cpu runs the trellis ops as they are");
  for (const PhaseInfo &info : allPhases()) {
    if (info.phase < plan.start || info.phase > plan.finalPhase ||
        !info.appliesTo(tgt) || info.builtFor(tgt))
      continue;
    Phase reach = lastReachablePhase(plan.start, tgt);
    return compileError(
        "phase '" + info.name + "' (" + info.summary +
        ") is not implemented yet for --target=" + targetName +
        " in this build of trellisc; from this input the compiler can reach '" +
        getPhaseInfo(reach).name +
        "' (use --compile-to=" + getPhaseInfo(reach).name +
        (tgt == Target::CUDA && getPhaseInfo(Phase::Bundle).builtForCPU
             ? ", or --target=cpu for the CPU reference backend"
             : "") +
        ")");
  }
  return 0;
}

/// The input as trellis IR: a pipeline.json traced (config and trace
/// phases), or a .mlir file parsed (its errors go through `sourceMgr`).
/// Returns null when the compile stops here, with `exitCode` (0 after the
/// config phase's summary).
OwningOpRef<ModuleOp> loadInput(MLIRContext &context,
                                llvm::SourceMgr &sourceMgr,
                                const CompilePlan &plan,
                                CompiledInput &compiled, int &exitCode) {
  if (plan.start == Phase::Config)
    return tracePipeline(context, plan.finalPhase, compiled, exitCode);
  exitCode = 1;
  std::string error;
  auto input = openInputFile(inputFilename, &error);
  if (!input) {
    compileError(error);
    return nullptr;
  }
  // A hostile nesting depth would overflow the parser's stack.
  if (::trellis::Status deep =
          ::trellis::checkNestingDepth(input->getBuffer(), inputFilename);
      !deep) {
    llvm::errs() << deep.message() << "\n";
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return nullptr; // the parser reported the error with its location
  compiled.entries.push_back(kEntryFunction.str());
  compiled.inputFiles.push_back(inputFilename);
  return module;
}

/// The path -o names or, for a bundle or an executable, its default.
std::string outputPathFor(EmitKind emit) {
  std::string outPath = outputFilename;
  if (outPath.empty() && emit == EmitKind::Exe)
    outPath = "trellis.exe";
  else if (outPath.empty() && emit == EmitKind::Bundle)
    outPath = "trellis.bundle";
  return outPath;
}

/// --dump-phases-to: writes the IR after `phase` when it produces IR.
LogicalResult dumpPhaseIR(Phase phase, ModuleOp module) {
  const PhaseInfo &info = getPhaseInfo(phase);
  if (dumpPhasesTo.empty() || !info.producesMLIR)
    return success();
  std::string name = llvm::formatv("{0:d2}-{1}.mlir", int(phase), info.name);
  return dumpFile(dumpPhasesTo, name,
                  [&](llvm::raw_ostream &os) { module.print(os); });
}

/// --dump-phases-to: writes the generated PTX (after codegen).
LogicalResult dumpKernels(const codegen::GeneratedKernels &kernels) {
  if (dumpPhasesTo.empty())
    return success();
  for (auto [name, ptx] : {std::pair{"kernels.sm_90a.ptx", &kernels.ptxSm90a},
                           {"kernels.compute_75.ptx", &kernels.ptxCompute75}})
    if (!ptx->empty() &&
        failed(dumpFile(dumpPhasesTo, name,
                        [&](llvm::raw_ostream &os) { os << *ptx; })))
      return failure();
  return success();
}

/// The phases after the input's, one at a time (codegen also fills
/// `kernels`); with --dump-phases-to the IR after each (the input's own
/// first) and the PTX. Returns the exit code, 0 when all ran.
int runPhases(ModuleOp module, const CompilePlan &plan,
              const CompiledInput &compiled,
              codegen::GeneratedKernels &kernels) {
  if (!dumpPhasesTo.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(dumpPhasesTo))
      return compileError("--dump-phases-to: cannot create '" + dumpPhasesTo +
                          "': " + ec.message());
  if (failed(dumpPhaseIR(plan.start == Phase::Config
                             ? std::min(plan.finalPhase, Phase::Trellis)
                             : plan.start,
                         module)))
    return 1;
  compile::BackendOptions options;
  options.target = plan.tgt;
  options.passManagerCommandLine = true;
  // Every entry runs on the GPU whole: a pipeline's stages (and exported
  // networks), an MLIR program's main.
  options.gpuEntries = compiled.entries;
  if (tileForSms < 1)
    return usageError("--tile-for-sms must be at least 1, found " +
                      std::to_string(tileForSms));
  options.tiling = {int64_t(mlpChunkTokens), int64_t(mlpHiddenMiB) << 20,
                    int64_t(tileForSms)};
  options.fp8ScalesFile = fp8Scales;
  // (A pipeline's trace is its trellis IR: the front made both.)
  auto dumps = [&](Phase phase) -> LogicalResult {
    if (failed(dumpPhaseIR(phase, module)))
      return failure();
    return phase == Phase::Codegen ? dumpKernels(kernels) : success();
  };
  return failed(compile::runPhases(module, std::max(plan.start, Phase::Trellis),
                                   plan.finalPhase, options, kernels, dumps))
             ? 1
             : 0;
}

/// --emit=mlir and --emit=ptx: writes the text to -o (stdout by default).
int writeTextOutput(llvm::function_ref<void(llvm::raw_ostream &)> write) {
  std::string error;
  std::string outPath =
      outputFilename.empty() ? std::string("-") : outputFilename.getValue();
  auto output = openOutputFile(outPath, &error);
  if (!output)
    return compileError(error);
  write(output->os());
  output->keep();
  return 0;
}

int run() {
  CompilePlan plan;
  plan.tgt = target;
  if (int rc = planPhases(plan))
    return rc;
  if (int rc = planEmit(plan))
    return rc;
  if (int rc = checkPhasesBuilt(plan))
    return rc;

  DialectRegistry registry;
  registry.insert<::mlir::trellis::TrellisDialect, func::FuncDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // Diagnostics name the user's line; the generic form of our ops is noise.
  context.printOpOnDiagnostic(false);

  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  CompiledInput compiled;
  int exitCode = 0;
  OwningOpRef<ModuleOp> module =
      loadInput(context, sourceMgr, plan, compiled, exitCode);
  if (!module)
    return exitCode;
  // Before any phase runs: -o must not name an input (or the runtime).
  if (failed(
          checkOutputIsNoInput(outputPathFor(plan.emit), compiled.inputFiles)))
    return 1;

  codegen::GeneratedKernels kernels;
  if (int rc = runPhases(*module, plan, compiled, kernels))
    return rc;
  if (plan.emit == EmitKind::PTX)
    return writeTextOutput(
        [&](llvm::raw_ostream &os) { os << kernels.ptxSm90a; });
  if (plan.emit == EmitKind::MLIR)
    return writeTextOutput([&](llvm::raw_ostream &os) { module->print(os); });
  return emitBundle(*module, plan.emit, compiled, plan.tgt, kernels);
}

} // namespace

int compilerMain(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  exposeMLIRDebugOptions();
  cl::HideUnrelatedOptions({&category, &pipelineCategory, &debugCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "trellisc: ahead-of-time compiler for the TRELLIS image-to-3D "
      "pipeline\n\n"
      "  trellisc models/TRELLIS-image-large/pipeline.json -o trellis.exe\n"
      "  trellisc model.mlir --compile-to=graph   (print the IR after a "
      "phase)\n\n"
      "Phases (in order): config, trace, trellis, graph, fusion, tiling,\n"
      "partition, codegen, plan, bundle. See docs/ARCHITECTURE.md.\n");
  return run();
}

} // namespace trellis
