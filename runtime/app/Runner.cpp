//===- Runner.cpp - Bundles, weights and the Session ----------------------===//
//
// What every way of running a program shares: a bundle with its sections
// parsed, weights from a model directory, and the Session that runs entry
// functions on the GPU or the CPU reference. The TRELLIS pipeline on top of
// them is Engine.cpp / Generation.cpp.
//
//===----------------------------------------------------------------------===//
#include "trellis/Runtime/Runner.h"

#include "trellis/Format/Safetensors.h"

#include <algorithm>
#include <filesystem>
#include <mutex>

namespace trellis {

namespace fs = std::filesystem;
using json = nlohmann::json;

//===----------------------------------------------------------------------===//
// LoadedBundle
//===----------------------------------------------------------------------===//

static Result<LoadedBundle> finishLoad(Bundle bundle,
                                       const std::string &source) {
  const std::string *program = bundle.find("program");
  const std::string *locations = bundle.find("locations");
  if (!program || !locations)
    return Error{"the bundle lacks its program or location table"};
  auto prog = Program::parse(*program, *locations, source);
  if (!prog)
    return Error{prog.message()};
  json meta = json::parse(bundle.find("meta") ? *bundle.find("meta") : "{}",
                          nullptr, false);
  json weights = json::parse(
      bundle.find("weights") ? *bundle.find("weights") : "{}", nullptr, false);
  if (meta.is_discarded() || weights.is_discarded())
    return Error{"the bundle's meta or weights section is not JSON"};
  return LoadedBundle{std::move(bundle), std::move(*prog), std::move(meta),
                      std::move(weights), source};
}

Result<LoadedBundle> LoadedBundle::load(const std::string &path,
                                        bool embedded) {
  auto bundle = embedded ? Bundle::readEmbedded(path) : Bundle::readFile(path);
  if (!bundle)
    return Error{bundle.message()};
  return finishLoad(std::move(*bundle), path);
}

Result<LoadedBundle> LoadedBundle::fromBytes(std::string_view bytes,
                                             const std::string &what) {
  auto bundle = Bundle::parse(bytes, what);
  if (!bundle)
    return Error{bundle.message()};
  return finishLoad(std::move(*bundle), what);
}

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

WeightProvider modelDirectoryWeights(const json &manifest,
                                     const std::string &modelDir,
                                     WeightProvider *shapes) {
  // The files, opened once and shared by both providers (and by the
  // threads that stage weights in the background).
  struct Files {
    std::mutex mutex;
    std::map<std::string, std::shared_ptr<const SafetensorsFile>> open;
  };
  auto files = std::make_shared<Files>();
  auto entry = [files, manifest, modelDir](const std::string &model,
                                           const std::string &name)
      -> Result<std::pair<const SafetensorsFile *, const SafetensorsEntry *>> {
    std::lock_guard<std::mutex> lock(files->mutex);
    auto it = files->open.find(model);
    if (it == files->open.end()) {
      if (!manifest.contains(model) || !manifest[model].is_string())
        return Error{"the bundle lists no checkpoint for model '" + model +
                     "'"};
      std::string path =
          (fs::path(modelDir) / manifest[model].get<std::string>()).string();
      auto file = SafetensorsFile::open(path);
      if (!file)
        return Error{file.message()};
      it = files->open.emplace(model, *file).first;
    }
    const SafetensorsEntry *e = it->second->find(name);
    if (!e)
      return Error{"tensor '" + name + "' is missing from " +
                   it->second->path()};
    return std::make_pair(it->second.get(), e);
  };
  if (shapes)
    *shapes = [entry](const std::string &model,
                      const std::string &name) -> Result<HostTensor> {
      TRELLIS_ASSIGN_OR_RETURN(auto found, entry(model, name));
      return found.first->tensor(*found.second);
    };
  return [entry](const std::string &model,
                 const std::string &name) -> Result<HostTensor> {
    TRELLIS_ASSIGN_OR_RETURN(auto found, entry(model, name));
    // A checked read, not a view into the mapping: a checkpoint truncated
    // or rewritten while the run has it open is a named error, not SIGBUS.
    return found.first->load(*found.second);
  };
}

//===----------------------------------------------------------------------===//
// Session: the one place an entry function is executed
//===----------------------------------------------------------------------===//

BundleGpuCode BundleGpuCode::from(const LoadedBundle &b) {
  BundleGpuCode code;
  auto section = [&](const char *name) {
    const std::string *s = b.bundle.find(name);
    return s ? *s : std::string();
  };
  code.images.ptxSm90a = section("ptx.sm_90a");
  code.images.cubinSm90a = section("cubin.sm_90a");
  code.images.ptxCompute75 = section("ptx.compute_75");
  code.images.attnSm90a = section("attn.sm_90a");
  code.images.attnCompute80 = section("attn.compute_80");
  code.images.attnCompute75 = section("attn.compute_75");
  for (int sm : {75, 80, 86, 89}) {
    const std::string arch = "sm_" + std::to_string(sm);
    if (std::string s = section(("cubin." + arch).c_str()); !s.empty())
      code.images.cubinsGenerated[sm] = std::move(s);
    if (std::string s = section(("attn." + arch).c_str()); !s.empty())
      code.images.cubinsAttention[sm] = std::move(s);
  }
  if (b.meta.contains("gpu_entries") && b.meta["gpu_entries"].is_array())
    for (const auto &e : b.meta["gpu_entries"])
      if (e.is_string())
        code.entries.push_back(e.get<std::string>());
  return code;
}

Session::Session(const Program &program, WeightProvider weights,
                 const SessionOptions &options)
    : exec_(std::make_unique<CpuExecutor>(program, weights)),
      gpuMode_(options.gpu.mode) {
  exec_->setCheckFinite(options.checkFinite);
  for (const auto &[fn, o] : options.samplerOverrides)
    exec_->setSamplerOverrides(fn, o);
  if (options.onStep)
    exec_->setStepCallback(options.onStep);
  if (options.fp8Observer)
    exec_->setFp8Observer(options.fp8Observer);
  if (options.gpuCode.entries.empty() || gpuMode_ == GpuMode::Off)
    return;
  GpuOptions gpuOptions = options.gpu.options;
  gpuOptions.checkFinite = gpuOptions.checkFinite || options.checkFinite;
  auto gpu = GpuExecutor::create(program, options.gpuCode.images,
                                 std::move(weights), gpuOptions);
  if (!gpu) {
    gpuUnavailable_ = gpu.message();
    if (options.notice && gpuMode_ == GpuMode::Auto)
      options.notice("notice: no usable GPU (" + gpuUnavailable_ +
                     "): running every stage on the CPU reference");
    return;
  }
  gpu_ = std::move(gpu).value();
  gpuEntries_ = options.gpuCode.entries;
  for (const auto &[fn, o] : options.samplerOverrides)
    gpu_->setSamplerOverrides(fn, o);
  if (options.onStep)
    gpu_->setStepCallback(options.onStep);
  if (options.fp8Observer)
    gpu_->setFp8Observer(options.fp8Observer);
  if (options.notice)
    options.notice("[gpu] " + gpu_->report().device + " (sm_" +
                   std::to_string(gpu_->report().computeCapability) +
                   "): runs " +
                   [&] {
                     std::string s;
                     for (const auto &e : gpuEntries_)
                       s += (s.empty() ? "" : ", ") + e;
                     return s;
                   }() +
                   " (" + gpu_->report().codePath + " kernels" +
                   (gpuOptions.portable ? ", --gpu-arch portable" : "") +
                   "; generated: " + gpu_->report().generatedImage +
                   ", attention: " + gpu_->report().attentionImage +
                   ", modules loaded in " +
                   std::to_string(gpu_->report().moduleLoadSeconds) + " s)");
}

Session::~Session() = default;

const char *Session::backend(const std::string &name) const {
  if (gpu_ && std::find(gpuEntries_.begin(), gpuEntries_.end(), name) !=
                  gpuEntries_.end())
    return "cuda";
  return "cpu";
}

const GpuReport *Session::gpuReport() const {
  return gpu_ ? &gpu_->report() : nullptr;
}

void Session::setRunHooks(
    const std::map<std::string, SamplerRunOverrides> &overrides,
    StepCallback onStep) {
  for (const auto &[fn, o] : overrides) {
    exec_->setSamplerOverrides(fn, o);
    if (gpu_)
      gpu_->setSamplerOverrides(fn, o);
  }
  exec_->setStepCallback(onStep);
  if (gpu_)
    gpu_->setStepCallback(std::move(onStep));
}

void Session::prepareInBackground(const std::string &name,
                                  std::vector<RtValue> args) {
  if (std::string(backend(name)) == "cuda")
    gpu_->prepareInBackground(name, std::move(args));
}

Result<std::vector<RtValue>> Session::call(const std::string &name,
                                           std::vector<RtValue> args,
                                           const std::vector<bool> *deviceOnly,
                                           DeviceIo *io) {
  if (std::string(backend(name)) == "cuda")
    return gpu_->run(name, std::move(args), deviceOnly, io);
  if (io) {
    for (size_t i = 0; i < io->args.size(); ++i)
      if (io->args[i])
        return Error{
            "argument " + std::to_string(i) + " of '" + name +
            "' is in GPU memory, but '" + name +
            "' runs on the CPU reference here" +
            (gpuUnavailable_.empty() ? "" : " (" + gpuUnavailable_ + ")")};
    io->results.assign(io->resultsOnDevice.size(), 0);
  }
  if (gpuMode_ == GpuMode::Require && !gpuUnavailable_.empty())
    return Error{"--gpu=require: no usable GPU (" + gpuUnavailable_ + ")"};
  return exec_->run(name, std::move(args));
}

PipelineObserver::~PipelineObserver() = default;

Status expectInputType(const HostTensor &t, const ValueType &type,
                       const std::string &what) {
  bool ok = t.dtype() == type.dtype && t.rank() == int(type.shape.size());
  for (int d = 0; ok && d < t.rank(); ++d)
    ok = type.shape[d] < 0 || type.shape[d] == t.dim(d);
  if (!ok)
    return Error{what + " is " + shapeToString(t.shape()) + " " +
                 std::string(dtypeName(t.dtype())) +
                 ", the compiled program expects " + type.str()};
  return Status::ok();
}

} // namespace trellis
