//===- Compiler.cpp - libtrellisc: the compiler behind a C API ------------===//
//
// include/trellis/trellisc.h. Compiles a JSON trace (python/trellisc) by
// replaying it through the C++ tracing API (include/trellis/Trace), or a
// pipeline.json through the model builders, then runs the phases after the
// trace for the CPU reference or CUDA (fusion, tiling, partition, codegen to
// PTX) like trellisc does. Every problem becomes a diagnostic record; nothing
// is printed, nothing aborts.
//
//===----------------------------------------------------------------------===//
#include "trellis/trellisc.h"

#include "dialect/TrellisDialect.h"
#include "dialect/TrellisTypes.h"
#include "lib/CAPI/TraceReplay.h"
#include "lib/Compile/Backend.h"
#include "lib/Compile/PipelineFront.h"
#include "lib/Target/HostProgram.h"
#include "lib/Transforms/Passes.h"
#include "trellis/Config/PipelineConfig.h"
#include "trellis/Format/Safetensors.h"
#include "trellis/Models/Builders.h"
#include "trellis/Models/Manifest.h"
#include "trellis/Runtime/Bundle.h"
#include "trellis/Trace/Tracer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace mlir;
using json = nlohmann::json;

struct trellisc_result {
  std::string bundle, ir, info = "{}";
  std::vector<::trellis::capi::DiagRecord> diags;
  std::string diagsJson;
};

namespace trellis::capi {
namespace {

/// JSON text that never throws (an invalid UTF-8 byte in a path would;
/// this code is built without exceptions, so a throw would abort).
std::string safeDump(const json &j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

/// Options common to both inputs.
struct CompileOptions {
  std::string target = "cpu";
  std::string emit = "bundle";
  std::string compileTo = "bundle";
  bool inferOnly = false;
  // pipeline.json only
  int64_t batch = 1, condTokens = 0, images = 1;
  std::string multiImage = "none", precision = "trellis";
  std::string fp8Scales; // precision "fp8": the calibration file
};

bool parseOptions(const char *text, CompileOptions &o, std::string &error) {
  if (!text || !*text)
    return true;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    error = "the compile options are not a JSON object";
    return false;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    auto str = [&](std::string &dst) {
      if (!v.is_string())
        return error = "option '" + k + "' must be a string", false;
      dst = v.get<std::string>();
      return true;
    };
    auto num = [&](int64_t &dst) {
      if (!v.is_number_integer())
        return error = "option '" + k + "' must be an integer", false;
      dst = v.get<int64_t>();
      return true;
    };
    bool ok = true;
    if (k == "target")
      ok = str(o.target);
    else if (k == "emit")
      ok = str(o.emit);
    else if (k == "compile_to")
      ok = str(o.compileTo);
    else if (k == "infer_only") {
      if (!v.is_boolean())
        return error = "option 'infer_only' must be true or false", false;
      o.inferOnly = v.get<bool>();
    } else if (k == "batch")
      ok = num(o.batch);
    else if (k == "cond_tokens")
      ok = num(o.condTokens);
    else if (k == "images")
      ok = num(o.images);
    else if (k == "multi_image")
      ok = str(o.multiImage);
    else if (k == "precision")
      ok = str(o.precision);
    else if (k == "fp8_scales")
      ok = str(o.fp8Scales);
    else
      return error = "unknown compile option '" + k + "'", false;
    if (!ok)
      return false;
  }
  if (o.target == "auto" && !compile::cudaTargetAvailable())
    o.target = "cpu";
  if (o.target != "cpu" && o.target != "cuda" && o.target != "auto") {
    error = "target must be 'cpu', 'cuda' or 'auto', found '" + o.target + "'";
    return false;
  }
  if (o.target == "cuda" && !compile::cudaTargetAvailable()) {
    error = "target 'cuda': this libtrellisc was built without the CUDA "
            "toolkit (no attention kernels); use target='cpu'";
    return false;
  }
  if (o.emit != "bundle" && o.emit != "mlir") {
    error = "emit must be 'bundle' or 'mlir', found '" + o.emit + "'";
    return false;
  }
  if (o.compileTo != "trellis" && o.compileTo != "graph" &&
      o.compileTo != "bundle") {
    error = "compile_to must be 'trellis', 'graph' or 'bundle', found '" +
            o.compileTo + "'";
    return false;
  }
  if (o.compileTo != "bundle" && o.emit == "bundle")
    o.emit = "mlir";
  return true;
}

/// Captures MLIR diagnostics as records.
class DiagCapture {
public:
  DiagCapture(MLIRContext &ctx, std::vector<DiagRecord> &out)
      : handler_(&ctx, [&out](Diagnostic &d) {
          DiagRecord r = recordFromLocation(d.getLocation());
          r.severity = d.getSeverity() == DiagnosticSeverity::Error ? "error"
                       : d.getSeverity() == DiagnosticSeverity::Warning
                           ? "warning"
                           : "note";
          r.message = d.str();
          out.push_back(std::move(r));
          for (Diagnostic &note : d.getNotes()) {
            DiagRecord n = recordFromLocation(note.getLocation());
            n.severity = "note";
            n.message = note.str();
            out.push_back(std::move(n));
          }
          return success();
        }) {}

private:
  ScopedDiagnosticHandler handler_;
};

std::string locString(const config::SourcePos &p) {
  return p.file + ":" + std::to_string(p.line) + ":" + std::to_string(p.column);
}

DiagRecord fromTraceError(const trace::TraceError &e) {
  DiagRecord r;
  r.message = e.message;
  r.file = e.sourceFile;
  r.line = e.sourceLine;
  r.column = e.sourceColumn;
  r.kind = e.sourceFile.empty() ? "" : "source";
  r.module = e.modulePath;
  if (e.config && !e.config->file.empty()) {
    r.config = locString(*e.config);
    r.configPath = e.config->path;
  }
  return r;
}

DiagRecord plain(std::string message) {
  DiagRecord r;
  r.message = std::move(message);
  return r;
}

/// The phases after the trace (lib/Compile, as trellisc runs them) for the
/// target, then the IR text or the bundle. `gpuEntries`: the functions the
/// CUDA target runs on the GPU. Target "auto" is CUDA, or the CPU reference
/// (with a warning giving the reason) for a program the CUDA phases refuse.
int finish(ModuleOp input, const CompileOptions &o,
           const std::vector<std::string> &entries,
           const std::vector<std::string> &gpuEntries, json meta,
           const std::string &weightManifest, trellisc_result &r) {
  if (failed(mlir::verify(input)))
    return TRELLISC_COMPILE_ERROR;
  compile::BackendOptions backend;
  backend.target = o.target == "cpu" ? Target::CPU : Target::CUDA;
  backend.gpuEntries = gpuEntries;
  backend.fp8ScalesFile = o.fp8Scales;
  codegen::GeneratedKernels kernels; // the CPU target generates none
  const Phase last = o.compileTo == "trellis" ? Phase::Trellis
                     : o.compileTo == "graph" ? Phase::Graph
                                              : Phase::Plan;
  // "auto" keeps the traced module to fall back to.
  OwningOpRef<ModuleOp> traced;
  if (o.target == "auto")
    traced = input.clone();
  ModuleOp module = input;
  const size_t diagsBefore = r.diags.size();
  if (failed(
          compile::runPhases(module, Phase::Trellis, last, backend, kernels))) {
    if (o.target != "auto")
      return TRELLISC_COMPILE_ERROR;
    DiagRecord why = r.diags.size() > diagsBefore ? r.diags[diagsBefore]
                                                  : plain("unknown reason");
    r.diags.resize(diagsBefore);
    why.severity = "warning";
    why.message = "compiled for the CPU reference, not CUDA: " + why.message;
    r.diags.push_back(std::move(why));
    module = *traced;
    backend.target = Target::CPU;
    kernels = codegen::GeneratedKernels();
    if (failed(
            compile::runPhases(module, Phase::Trellis, last, backend, kernels)))
      return TRELLISC_COMPILE_ERROR;
  }
  if (o.emit == "mlir") {
    llvm::raw_string_ostream os(r.ir);
    module.print(os);
    return TRELLISC_OK;
  }
  compile::BundleContents contents;
  contents.entries = entries;
  contents.weightManifest = weightManifest;
  contents.compiler = meta.value("compiler", "");
  contents.inputName = meta.value("input", "");
  for (const auto &[key, value] : meta.items())
    if (key != "compiler" && key != "input" && key != "target")
      contents.extraMeta[key] = value;
  Result<Bundle> bundle =
      compile::assembleBundle(module, backend.target, contents, kernels);
  if (!bundle) {
    r.diags.push_back(plain(bundle.message()));
    return TRELLISC_COMPILE_ERROR;
  }
  r.bundle = bundle->serialize();
  return TRELLISC_OK;
}

MLIRContext *newContext(std::unique_ptr<MLIRContext> &owner) {
  DialectRegistry registry;
  registry.insert<::mlir::trellis::TrellisDialect, func::FuncDialect>();
  owner =
      std::make_unique<MLIRContext>(registry, MLIRContext::Threading::DISABLED);
  owner->loadAllAvailableDialects();
  return owner.get();
}

int compileTrace(const char *text, size_t size, const char *optionsJson,
                 trellisc_result &r) {
  CompileOptions o;
  std::string error;
  if (!parseOptions(optionsJson, o, error)) {
    r.diags.push_back(plain(error));
    return TRELLISC_USAGE_ERROR;
  }
  json trace = json::parse(std::string_view(text ? text : "", size), nullptr,
                           /*allow_exceptions=*/false);
  if (trace.is_discarded()) {
    r.diags.push_back(plain("the trace is not valid JSON"));
    return TRELLISC_USAGE_ERROR;
  }
  std::unique_ptr<MLIRContext> ctxOwner;
  MLIRContext &ctx = *newContext(ctxOwner);
  DiagCapture capture(ctx, r.diags);
  trace::Tracer tracer(ctx);
  ReplayResult replay = replayTrace(tracer, trace);
  if (!replay.usageError.empty()) {
    r.diags.push_back(plain(replay.usageError));
    return TRELLISC_USAGE_ERROR;
  }
  r.info = safeDump(replay.info);
  if (tracer.hasErrors()) {
    for (const trace::TraceError &e : tracer.errors()) {
      DiagRecord d = fromTraceError(e);
      d.kind = "user";
      r.diags.push_back(std::move(d));
    }
    return TRELLISC_COMPILE_ERROR;
  }
  if (o.inferOnly)
    return TRELLISC_OK;
  OwningOpRef<ModuleOp> module = tracer.takeModule();
  json meta = {{"compiler", "trellisc " TRELLISC_VERSION},
               {"input", replay.source},
               {"frontend", "python"}};
  json weights = json::object();
  return finish(*module, o, {replay.function}, {replay.function}, meta,
                safeDump(weights), r);
}

/// Config + trace phases of a pipeline.json (lib/Compile, as trellisc runs
/// them).
int compilePipeline(const char *path, const char *optionsJson,
                    trellisc_result &r) {
  CompileOptions o;
  std::string error;
  if (!parseOptions(optionsJson, o, error)) {
    r.diags.push_back(plain(error));
    return TRELLISC_USAGE_ERROR;
  }
  if (o.precision != "trellis" && o.precision != "fp32" &&
      o.precision != "fp8") {
    r.diags.push_back(plain("precision must be 'trellis', 'fp32' or 'fp8', "
                            "found '" +
                            o.precision + "'"));
    return TRELLISC_USAGE_ERROR;
  }
  if (!o.fp8Scales.empty() && o.precision != "fp8") {
    r.diags.push_back(plain("fp8_scales needs precision 'fp8'"));
    return TRELLISC_USAGE_ERROR;
  }
  using Outcome = compile::PipelineFront::Outcome;
  compile::PipelineRequest request;
  request.input = path ? path : "";
  request.allFp32 = o.precision == "fp32";
  request.fp8Linears = o.precision == "fp8";
  request.batch = o.batch;
  request.condTokens = o.condTokens;
  request.images = o.images;
  request.multiImage = o.multiImage;
  if (std::string bad =
          compile::checkRequest(request, compile::OptionNames::Json);
      !bad.empty()) {
    r.diags.push_back(plain(bad));
    return TRELLISC_USAGE_ERROR;
  }
  std::unique_ptr<MLIRContext> ctxOwner;
  MLIRContext &ctx = *newContext(ctxOwner);
  DiagCapture capture(ctx, r.diags);
  compile::PipelineFront front = compile::tracePipeline(ctx, request);
  for (const config::Diagnostic &d : front.configDiagnostics) {
    DiagRecord rec = plain(d.message);
    rec.severity = d.severity == config::Diagnostic::Severity::Warning
                       ? "warning"
                       : "error";
    rec.file = d.pos.file;
    rec.line = d.pos.line;
    rec.column = d.pos.column;
    rec.kind = "config";
    rec.configPath = d.pos.path;
    r.diags.push_back(std::move(rec));
  }
  switch (front.outcome) {
  case Outcome::ConfigFailed: {
    bool anyError = false;
    for (const DiagRecord &d : r.diags)
      anyError |= d.severity == "error";
    if (!anyError)
      r.diags.push_back(plain(front.configError));
    return TRELLISC_COMPILE_ERROR;
  }
  case Outcome::CheckpointFailed: {
    const config::ModelRef &m = *front.checkpointModel;
    DiagRecord d =
        plain("checkpoint of '" + m.key + "': " + front.checkpointError);
    d.file = m.path.pos.file;
    d.line = m.path.pos.line;
    d.column = m.path.pos.column;
    d.kind = "config";
    r.diags.push_back(std::move(d));
    return TRELLISC_COMPILE_ERROR;
  }
  case Outcome::TraceFailed:
    for (const trace::TraceError &e : front.traceErrors) {
      DiagRecord d = fromTraceError(e);
      d.kind = "builder";
      r.diags.push_back(std::move(d));
    }
    return TRELLISC_COMPILE_ERROR;
  case Outcome::Ok:
    break;
  }
  OwningOpRef<ModuleOp> module = std::move(front.module);
  const std::string &input = request.input;
  json meta = {{"compiler", "trellisc " TRELLISC_VERSION},
               {"input", llvm::sys::path::filename(input).str()}};
  if (front.slatResolution)
    meta["slat_resolution"] = front.slatResolution;
  return finish(*module, o, front.entries, front.entries, meta,
                front.weightManifest, r);
}

void finalize(trellisc_result &r) {
  json all = json::array();
  for (const DiagRecord &d : r.diags)
    all.push_back({{"severity", d.severity},
                   {"message", d.message},
                   {"file", d.file},
                   {"line", d.line},
                   {"column", d.column},
                   {"kind", d.kind},
                   {"module", d.module},
                   {"config", d.config},
                   {"config_path", d.configPath}});
  r.diagsJson = all.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace
} // namespace trellis::capi

using namespace ::trellis::capi;

extern "C" {

const char *trellisc_version(void) { return "trellisc " TRELLISC_VERSION; }

int trellisc_compile_trace(const char *trace_json, size_t size,
                           const char *options_json, trellisc_result **out) {
  if (!out)
    return TRELLISC_USAGE_ERROR;
  auto *r = new trellisc_result();
  *out = r;
  int rc = compileTrace(trace_json, size, options_json, *r);
  if (rc != TRELLISC_OK && r->diags.empty())
    r->diags.push_back(plain("the compile failed without a diagnostic"));
  finalize(*r);
  return rc;
}

int trellisc_compile_pipeline(const char *pipeline_path,
                              const char *options_json, trellisc_result **out) {
  if (!out)
    return TRELLISC_USAGE_ERROR;
  auto *r = new trellisc_result();
  *out = r;
  int rc = compilePipeline(pipeline_path, options_json, *r);
  if (rc != TRELLISC_OK && r->diags.empty())
    r->diags.push_back(plain("the compile failed without a diagnostic"));
  finalize(*r);
  return rc;
}

const void *trellisc_result_bundle(const trellisc_result *r, size_t *size) {
  if (size)
    *size = r && !r->bundle.empty() ? r->bundle.size() : 0;
  return r && !r->bundle.empty() ? r->bundle.data() : nullptr;
}

const char *trellisc_result_ir(const trellisc_result *r) {
  return r ? r->ir.c_str() : "";
}

const char *trellisc_result_info(const trellisc_result *r) {
  return r ? r->info.c_str() : "{}";
}

size_t trellisc_result_num_diagnostics(const trellisc_result *r) {
  return r ? r->diags.size() : 0;
}

int trellisc_result_diagnostic(const trellisc_result *r, size_t i,
                               trellisc_diagnostic *d) {
  if (!r || !d || i >= r->diags.size())
    return -1;
  const DiagRecord &x = r->diags[i];
  d->severity = x.severity.c_str();
  d->message = x.message.c_str();
  d->file = x.file.c_str();
  d->line = x.line;
  d->column = x.column;
  d->kind = x.kind.c_str();
  d->module = x.module.c_str();
  d->config = x.config.c_str();
  d->config_path = x.configPath.c_str();
  return 0;
}

const char *trellisc_result_diagnostics_json(const trellisc_result *r) {
  return r ? r->diagsJson.c_str() : "[]";
}

void trellisc_result_free(trellisc_result *r) { delete r; }

} // extern "C"
