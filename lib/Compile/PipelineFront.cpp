//===- PipelineFront.cpp - pipeline.json to traced IR, shared -------------===//
//
// See PipelineFront.h.
//
//===----------------------------------------------------------------------===//
#include "lib/Compile/PipelineFront.h"

#include "lib/Transforms/Passes.h"
#include "trellis/Format/Safetensors.h"
#include "trellis/Models/Builders.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <memory>

namespace trellis::compile {

std::string checkRequest(const PipelineRequest &request, OptionNames names) {
  auto outside = [&](std::string name, int64_t v, int64_t lo, int64_t hi,
                     const char *note) {
    if (names == OptionNames::CommandLine)
      name = "--" + name;
    else
      std::replace(name.begin(), name.end(), '-', '_');
    return "option " + name + " must be in " + std::to_string(lo) + ".." +
           std::to_string(hi) + note + ", found " + std::to_string(v);
  };
  if (request.batch < 1 || request.batch > kMaxBatch)
    return outside("batch", request.batch, 1, kMaxBatch, "");
  if (request.images < 1 || request.images > kMaxImages)
    return outside("images", request.images, 1, kMaxImages, "");
  if (request.condTokens < 0 || request.condTokens > kMaxCondTokens)
    return outside("cond-tokens", request.condTokens, 0, kMaxCondTokens,
                   " (0: the model's default)");
  return "";
}

PipelineFront tracePipeline(mlir::MLIRContext &context,
                            const PipelineRequest &request) {
  using Outcome = PipelineFront::Outcome;
  PipelineFront front;
  Result<config::PipelineConfig> pipeline =
      config::loadPipeline(request.input, &front.configDiagnostics);
  if (!pipeline) {
    front.outcome = Outcome::ConfigFailed;
    front.configError = pipeline.message();
    return front;
  }
  front.pipeline = std::move(*pipeline);
  const config::PipelineConfig &p = *front.pipeline;
  front.inputFiles.push_back(request.input);
  for (const config::ModelRef &m : p.models)
    if (m.config)
      front.inputFiles.insert(front.inputFiles.end(),
                              {m.sidecarPath(), m.weightsPath()});
  nlohmann::json weights = nlohmann::json::object();
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> files;
  for (const config::ModelRef &m : p.models) {
    if (!m.config)
      continue;
    std::string rel = m.weightsPath();
    if (llvm::StringRef(rel).starts_with(p.dir + "/"))
      rel = rel.substr(p.dir.size() + 1);
    weights[m.key] = rel;
    if (request.configOnly)
      continue;
    Result<std::shared_ptr<const SafetensorsFile>> file =
        SafetensorsFile::open(m.weightsPath());
    if (!file) {
      front.outcome = Outcome::CheckpointFailed;
      front.checkpointModel = &m;
      front.checkpointError = file.message();
      return front;
    }
    files[m.key] = *file;
  }
  std::optional<config::ImageCondArgs> imageCond;
  if (p.pipelineClass == config::PipelineClass::ImageTo3D) {
    const bool asked = !request.imageModelDir.empty();
    const std::string dir = asked ? request.imageModelDir
                                  : p.dir + "/" + config::kImageCondModelDir;
    const std::string cfgPath = dir + "/config.json",
                      weightsPath = dir + "/model.safetensors";
    if (asked || llvm::sys::fs::exists(cfgPath)) {
      Result<config::ImageCondArgs> args =
          config::readImageCondConfig(cfgPath, &front.configDiagnostics);
      if (!args) {
        front.outcome = Outcome::ConfigFailed;
        front.configError = "the image-conditioning model: " + args.message();
        return front;
      }
      if (request.condTokens && request.condTokens != args->tokens()) {
        config::Diagnostic note;
        note.severity = config::Diagnostic::Severity::Warning;
        note.pos.file = cfgPath;
        note.message = "the image-conditioning model gives " +
                       std::to_string(args->tokens()) +
                       " tokens and --cond-tokens asks for " +
                       std::to_string(request.condTokens) +
                       ": the program takes conditioning tokens only (no "
                       "image_stage)";
        front.configDiagnostics.push_back(std::move(note));
      } else {
        imageCond = std::move(*args);
        front.inputFiles.insert(front.inputFiles.end(), {cfgPath, weightsPath});
        std::string rel = weightsPath;
        if (llvm::StringRef(rel).starts_with(p.dir + "/"))
          rel = rel.substr(p.dir.size() + 1);
        weights[models::kImageCondModelKey] = rel;
        if (!request.configOnly) {
          Result<std::shared_ptr<const SafetensorsFile>> file =
              SafetensorsFile::open(weightsPath);
          if (!file) {
            front.outcome = Outcome::ConfigFailed;
            front.configError =
                "the image-conditioning model: " + file.message();
            return front;
          }
          files[models::kImageCondModelKey] = *file;
        }
      }
    }
  }
  // (Paths need not be UTF-8: replace what JSON cannot hold.)
  front.weightManifest =
      weights.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (const config::ModelRef *flow = p.model(config::kSLatFlowKey);
      flow && flow->config && flow->config->slatFlow())
    front.slatResolution = *flow->config->slatFlow()->resolution;
  if (request.configOnly)
    return front;

  trace::Tracer tracer(context);
  tracer.setAllFp32(request.allFp32);
  tracer.setFp8Linears(request.fp8Linears);
  models::bindCheckpoints(tracer, p, std::move(files));
  models::PipelineOptions options;
  options.batch = request.batch;
  options.condTokens = request.condTokens;
  options.images = request.images;
  options.multiImage = request.multiImage;
  options.imageCond = std::move(imageCond);
  options.ssOverrides.origin = options.slatOverrides.origin =
      "trellisc options";
  models::buildPipeline(tracer, p, options);
  if (tracer.hasErrors()) {
    front.outcome = Outcome::TraceFailed;
    front.traceErrors = tracer.errors();
    return front;
  }
  front.module = tracer.takeModule();
  for (const char *stage : models::kStageFunctions)
    if (front.module->lookupSymbol<mlir::func::FuncOp>(stage))
      front.entries.push_back(stage);
  // The networks are the stages' callees, private to the program unless
  // exported (then the fusion passes keep them after inlining their calls).
  for (auto fn : front.module->getOps<mlir::func::FuncOp>()) {
    if (llvm::is_contained(front.entries, fn.getSymName()))
      continue;
    if (request.exportNetworks)
      front.entries.push_back(fn.getSymName().str());
    else
      fn.setPrivate();
  }
  return front;
}

void addGraphPhasePasses(mlir::PassManager &pm,
                         const std::string &fp8ScalesFile) {
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  if (!fp8ScalesFile.empty())
    pm.addPass(::mlir::trellis::createTrellisApplyFp8Scales(
        ::mlir::trellis::TrellisApplyFp8ScalesOptions{fp8ScalesFile}));
  pm.addPass(::mlir::trellis::createTrellisVerifyLocations());
}

} // namespace trellis::compile
