//===- Engine.cpp - The TRELLIS pipeline, set up once, run many times -----===//
//
// See Engine.h for the life cycle. The engine owns the Session (and through
// it the GPU executor, which keeps each entry function prepared: weights
// staged, memory planned, commands built, graphs captured) and the output
// writer; Generation.cpp runs the stages of one request.
//
//===----------------------------------------------------------------------===//
#include "trellis/Runtime/Engine.h"

#include "runtime/app/Generation.h"
#include "trellis/Runtime/Fp8Calibration.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <set>

namespace trellis {

/// Where the GEMM picks are kept by default: $TRELLIS_CACHE_DIR, else
/// $XDG_CACHE_HOME/trellis, else ~/.cache/trellis; empty without any.
std::string defaultGemmTuningCache() {
  auto env = [](const char *name) -> std::string {
    const char *v = std::getenv(name);
    return v ? v : "";
  };
  std::string dir = env("TRELLIS_CACHE_DIR");
  if (dir.empty() && !env("XDG_CACHE_HOME").empty())
    dir = env("XDG_CACHE_HOME") + "/trellis";
  if (dir.empty() && !env("HOME").empty())
    dir = env("HOME") + "/.cache/trellis";
  return dir.empty() ? "" : dir + "/gemm-tuning.json";
}

int pipelineStageOf(const std::string &function) {
  if (function == "image_stage")
    return 0;
  if (function == "ss_stage")
    return 1;
  return function == "slat_stage" ? 2 : 3;
}

Status checkProgramWeights(const Program &program,
                           const WeightProvider &weights, int lastStage,
                           bool images) {
  std::set<std::pair<std::string, std::string>> seen;
  std::function<Status(const std::vector<Instr> &)> walk =
      [&](const std::vector<Instr> &body) -> Status {
    for (const Instr &instr : body) {
      for (const Region &r : instr.regions)
        TRELLIS_RETURN_IF_ERROR(walk(r.body));
      if (instr.op != "trellis.weight")
        continue;
      auto model = instr.stringAttr("model");
      auto name = instr.stringAttr("name");
      if (!model || !name || instr.types.empty())
        return Error{"the program has a malformed trellis.weight op"};
      if (!seen.insert({*model, *name}).second)
        continue;
      auto t = weights(*model, *name);
      if (!t)
        return Error{t.message()};
      const ValueType &want = instr.types[0];
      if (t->dtype() != want.dtype || t->shape() != want.shape)
        return Error{"weight '" + *name + "' of model '" + *model + "' is " +
                     shapeToString(t->shape()) + " " +
                     std::string(dtypeName(t->dtype())) +
                     ", the compiled program expects " + want.str()};
    }
    return Status::ok();
  };
  for (const Function &fn : program.functions())
    if (int stage = pipelineStageOf(fn.name);
        stage <= lastStage && (stage > 0 || images))
      TRELLIS_RETURN_IF_ERROR(walk(fn.body));
  return Status::ok();
}

Engine::Engine(const LoadedBundle &bundle, std::unique_ptr<Session> session,
               int lastStage)
    : bundle_(bundle), lastStage_(lastStage), session_(std::move(session)) {}

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(const LoadedBundle &bundle,
                                               EngineOptions options) {
  if (!bundle.program.find("slat_stage"))
    return Error{"the bundle is not a TRELLIS pipeline (no slat_stage)"};
  // A model directory's checkpoints are checked through views (their
  // headers: no tensor is read here), then read with checked reads.
  WeightProvider shapes;
  WeightProvider weights =
      options.weights
          ? options.weights
          : modelDirectoryWeights(bundle.weights, options.modelDir, &shapes);
  if (options.lastStage < 1 || options.lastStage > 3)
    return Error{"the engine's last stage must be 1, 2 or 3, found " +
                 std::to_string(options.lastStage)};
  if (Status s = checkProgramWeights(bundle.program, shapes ? shapes : weights,
                                     options.lastStage, options.images);
      !s)
    return Error{"weights: " + s.message()};
  SessionOptions so;
  so.gpu = options.gpu;
  so.gpuCode = BundleGpuCode::from(bundle);
  so.notice = options.notice;
  so.checkFinite = options.checkFinite;
  so.fp8Observer = options.fp8Observer;
  auto session =
      std::make_unique<Session>(bundle.program, std::move(weights), so);
  if (options.gpu.mode == GpuMode::Require &&
      !session->gpuUnavailable().empty())
    return Error{"--gpu=require: no usable GPU (" + session->gpuUnavailable() +
                 ")"};
  // An FP8 program on a GPU that cannot run its FP8 GEMMs: refused here,
  // not at the first FP8 GEMM of a generation.
  if (const GpuReport *gpu = session->gpuReport())
    TRELLIS_RETURN_IF_ERROR(checkFp8Device(
        fp8ProgramKind(bundle.program).fp8, gpu->computeCapability / 10,
        gpu->computeCapability % 10, gpu->device));
  std::unique_ptr<Engine> engine(
      new Engine(bundle, std::move(session), options.lastStage));
  engine->notice_ = options.notice;
  if (engine->session_->gpuExecutor()) {
    // The GPU functions a generation may call, planned before any work.
    PipelineMemoryRequest &request = engine->memoryRequest_;
    for (const std::string &fn : so.gpuCode.entries)
      if (fn == "image_stage" ? options.images
                              : pipelineStageOf(fn) <= options.lastStage)
        request.functions.push_back(fn);
    request.flexiCubes =
        std::find(request.functions.begin(), request.functions.end(),
                  "decode_mesh") != request.functions.end();
    request.options = options.gpu.options;
    request.resolution = bundle.meta.value("slat_resolution", 64);
    TRELLIS_RETURN_IF_ERROR(engine->fitMemoryBudget(
        std::max<int64_t>(options.memoryPlanVoxels, 1)));
  }
  return engine;
}

Status Engine::fitMemoryBudget(int64_t voxels) {
  GpuExecutor *gpu = session_->gpuExecutor();
  PipelineMemoryRequest request = memoryRequest_;
  request.voxels = voxels;
  const auto start = std::chrono::steady_clock::now();
  auto plans = planPipelineMemory(bundle_.program, request);
  const double planSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!plans)
    return Error{plans.message()};
  // Never a faster form than the one taken (nor than --low-memory).
  const std::string floor =
      request.options.lowMemory ? "low-memory" : memory_.form;
  std::vector<PipelineMemoryPlan> candidates;
  for (const PipelineMemoryPlan &plan : *plans)
    if (!candidates.empty() || floor.empty() || plan.form == floor)
      candidates.push_back(plan);
  const size_t budget = gpu->report().memoryBudget;
  auto chosen = chooseMemoryForm(candidates, budget);
  if (!chosen)
    return Error{chosen.message() +
                 (voxels > memory_.voxels && memory_.voxels
                      ? " (stage 1 found " + std::to_string(voxels) +
                            " voxels, more than the " +
                            std::to_string(memory_.voxels) + " planned for)"
                      : std::string()) +
                 "; the budget is " +
                 (request.options.memoryBudget ? "--memory-budget's"
                                               : "the device's free memory") +
                 ", " + formatMiB(gpu->report().deviceFreeAtStart) +
                 " were free"};
  if (chosen->form != memory_.form)
    TRELLIS_RETURN_IF_ERROR(
        gpu->reduceMemoryForm(chosen->lowMemory, chosen->concurrentBranches));
  if (notice_) {
    std::string line = "[gpu] memory: " + chosen->form + " form, " +
                       formatMiB(chosen->peak) + " planned for " +
                       std::to_string(voxels) + " voxels, budget " +
                       formatMiB(budget);
    if (chosen->form != plans->front().form)
      line += " (the " + plans->front().form + " form needs " +
              formatMiB(plans->front().peak) + ")";
    line += "; planned on the host in " + std::to_string(planSeconds) + " s";
    notice_(line);
  }
  memory_ = *chosen;
  return Status::ok();
}

const char *Engine::backend(const std::string &name) const {
  return session_->backend(name);
}

namespace {
/// Clears the engine's busy flag when a run ends, however it ends.
struct BusyGuard {
  std::atomic<bool> &flag;
  ~BusyGuard() { flag.store(false); }
};
/// Removes the files of a failed generation (those written; a file a job
/// did not get to is absent, which is fine).
void removeFiles(const std::vector<std::string> &files) {
  for (const std::string &f : files) {
    std::error_code ec;
    std::filesystem::remove(f, ec);
  }
}
} // namespace

Status Engine::finishWrites(const GenerationStats &stats) {
  Status written = writer_.wait(stats.writeTicket);
  if (!written)
    removeFiles(stats.files);
  return written;
}

Result<PipelineResult> Engine::run(const GenerationRequest &request,
                                   PipelineObserver *observer) {
  bool expected = false;
  if (!busy_.compare_exchange_strong(expected, true))
    return Error{"engine busy: another thread is running a generation on "
                 "this engine (an engine runs one generation at a time; "
                 "create one engine per thread)"};
  BusyGuard guard{busy_};
  if (request.lastStage > lastStage_)
    return Error{"this engine was set up for the stages up to " +
                 std::to_string(lastStage_) +
                 " (their checkpoints only); the request asks for stage " +
                 std::to_string(request.lastStage)};
  const auto start = std::chrono::steady_clock::now();
  PipelineObserver none;
  PipelineObserver &obs = observer ? *observer : none;
  session_->setRunHooks(
      {{"ss_stage", request.ss}, {"slat_stage", request.slat}},
      [&obs](const std::string &fn, int64_t k, int64_t n) -> Status {
        obs.step(fn, k, n);
        if (obs.cancelled())
          return Error{"cancelled"};
        return Status::ok();
      });
  GenerationStats stats;
  const uint64_t firstJob = writer_.mark();
  // A voxel set larger than the memory plan's is planned again before the
  // sparse stages (maybe in a form that needs less).
  auto voxelsKnown = [this](int64_t voxels) -> Status {
    if (!session_->gpuExecutor() || voxels <= memory_.voxels)
      return Status::ok();
    return fitMemoryBudget(voxels);
  };
  auto result = runGeneration(bundle_, *session_, writer_, request, obs, stats,
                              voxelsKnown);
  // The step callback refers to this run's observer: drop it.
  session_->setRunHooks({}, nullptr);
  stats.writeTicket = writer_.mark();
  if (!result) {
    // Nothing of a failed generation stays: the files of its finished
    // stages (stage 1's coords.npy, ...) are written, then removed.
    writer_.discard(firstJob, stats.writeTicket);
    removeFiles(stats.files);
    return result;
  }
  if (!request.asyncWrites)
    if (Status written = writer_.wait(stats.writeTicket); !written) {
      removeFiles(stats.files);
      return Error{written.message()};
    }
  stats.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  stats_ = stats;
  return result;
}

} // namespace trellis
