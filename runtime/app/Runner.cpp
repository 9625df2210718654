//===- Runner.cpp - The TRELLIS pipeline run as a library
//-------------------===//
//
// Stage order, seeded noise, input checks and output files of trellis.exe;
// shared by the command line (App.cpp) and the C ABI (runtime/capi).
//
//===----------------------------------------------------------------------===//
#include "trellis/Runtime/Runner.h"

#include "trellis/Format/Npy.h"
#include "trellis/Format/Safetensors.h"
#include "trellis/Mesh/FlexiCubes.h"
#include "trellis/Output/Gaussians.h"
#include "trellis/Output/Mesh.h"
#include "trellis/Output/RadianceField.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

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
                                     const std::string &modelDir) {
  auto files = std::make_shared<
      std::map<std::string, std::shared_ptr<const SafetensorsFile>>>();
  return [files, manifest,
          modelDir](const std::string &model,
                    const std::string &name) -> Result<HostTensor> {
    auto it = files->find(model);
    if (it == files->end()) {
      if (!manifest.contains(model) || !manifest[model].is_string())
        return Error{"the bundle lists no checkpoint for model '" + model +
                     "'"};
      std::string path =
          (fs::path(modelDir) / manifest[model].get<std::string>()).string();
      auto file = SafetensorsFile::open(path);
      if (!file)
        return Error{file.message()};
      it = files->emplace(model, *file).first;
    }
    const SafetensorsEntry *e = it->second->find(name);
    if (!e)
      return Error{"tensor '" + name + "' is missing from " +
                   it->second->path()};
    return it->second->tensor(*e);
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
                   " (kernel modules loaded in " +
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

Result<std::vector<RtValue>> Session::call(const std::string &name,
                                           std::vector<RtValue> args) {
  if (std::string(backend(name)) == "cuda")
    return gpu_->run(name, std::move(args));
  if (gpuMode_ == GpuMode::Require && !gpuUnavailable_.empty())
    return Error{"--gpu=require: no usable GPU (" + gpuUnavailable_ + ")"};
  return exec_->run(name, std::move(args));
}

PipelineObserver::~PipelineObserver() = default;

//===----------------------------------------------------------------------===//
// The pipeline
//===----------------------------------------------------------------------===//

namespace {

/// Portable seeded normal noise: splitmix64 uniforms, Box–Muller pairs.
/// (Not PyTorch's generator; pass --ss-noise/--slat-noise for parity.)
class NormalRng {
public:
  explicit NormalRng(uint64_t seed) : state_(seed) {}
  HostTensor tensor(const Shape &shape) {
    HostTensor t(DType::F32, shape);
    float *p = t.mutableData<float>();
    for (int64_t i = 0; i < t.numel(); ++i)
      p[i] = next();
    return t;
  }

private:
  uint64_t splitmix() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (double(splitmix() >> 11) + 0.5) * 0x1.0p-53; }
  float next() {
    if (spare_) {
      float v = *spare_;
      spare_.reset();
      return v;
    }
    double r = std::sqrt(-2.0 * std::log(uniform()));
    double a = 2.0 * M_PI * uniform();
    spare_ = float(r * std::sin(a));
    return float(r * std::cos(a));
  }
  uint64_t state_;
  std::optional<float> spare_;
};

/// Rows [begin, end) of a tensor along dim 0 (a copy).
HostTensor rows(const HostTensor &t, int64_t begin, int64_t end) {
  Shape s = t.shape();
  size_t rowBytes = t.dim(0) ? t.nbytes() / size_t(t.dim(0)) : 0;
  s[0] = end - begin;
  HostTensor out(t.dtype(), s);
  if (end > begin)
    std::memcpy(out.mutableRaw(),
                static_cast<const char *>(t.raw()) + size_t(begin) * rowBytes,
                size_t(end - begin) * rowBytes);
  return out;
}

/// Per-sample row ranges of batch-contiguous coordinates [N, 4].
std::vector<std::pair<int64_t, int64_t>> sampleRanges(const HostTensor &c) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  const int32_t *p = c.data<int32_t>();
  for (int64_t i = 0; i < c.dim(0); ++i) {
    if (ranges.empty() || p[4 * i] != p[4 * (i - 1)])
      ranges.push_back({i, i});
    ranges.back().second = i + 1;
  }
  return ranges;
}

/// "gaussians.ply" for one sample, "gaussians_<b>.ply" for several.
std::string perSample(const std::string &stem, const std::string &ext,
                      size_t sample, size_t samples) {
  return samples == 1 ? stem + ext : stem + "_" + std::to_string(sample) + ext;
}

const HostTensor &tensorAt(const std::vector<RtValue> &r, size_t i) {
  return std::get<HostTensor>(r[i]);
}

class PipelineRun {
public:
  PipelineRun(const LoadedBundle &b, const PipelineRequest &req,
              PipelineObserver &obs)
      : b_(b), req_(req), obs_(obs), created_(std::chrono::steady_clock::now()),
        session_(b.program,
                 req.weights ? req.weights
                             : modelDirectoryWeights(b.weights, req.modelDir),
                 options(b, req, obs)) {}

  Result<PipelineResult> run();

private:
  static SessionOptions options(const LoadedBundle &b,
                                const PipelineRequest &req,
                                PipelineObserver &obs) {
    SessionOptions o;
    o.gpu = req.gpu;
    o.gpuCode = BundleGpuCode::from(b);
    o.notice = [&obs](const std::string &line) { obs.message(line); };
    o.checkFinite = req.checkFinite;
    o.samplerOverrides["ss_stage"] = req.ss;
    o.samplerOverrides["slat_stage"] = req.slat;
    o.onStep = [&obs](const std::string &fn, int64_t k, int64_t n) {
      obs.step(fn, k, n);
    };
    return o;
  }

  Result<std::vector<RtValue>> stage(const char *name, const char *title,
                                     std::vector<RtValue> args) {
    auto start = std::chrono::steady_clock::now();
    obs_.stageBegin(name, title);
    obs_.message(std::string("[") + title + "] running " + name);
    auto r = session_.call(name, std::move(args));
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (r) {
      std::ostringstream line;
      line << "[" << title << "] done in " << s << " s";
      if (std::string(session_.backend(name)) == "cuda") {
        const GpuReport &g = *session_.gpuReport();
        line << " on the GPU (" << g.runSeconds << " s of GPU time, "
             << (g.weightBytes >> 20) << " MiB weights staged in "
             << g.weightUploadSeconds << " s, " << (g.arenaBytes >> 20)
             << " MiB arena; host setup: plan " << g.planSeconds
             << " s, commands " << g.commandSeconds << " s)";
        if (g.checkedOps)
          line << "; " << g.checkedOps
               << " op results matched the CPU reference (worst relative L2 "
               << g.worstCheckError << ")";
      }
      obs_.message(line.str());
      obs_.stageEnd(name, title, s);
      stageSeconds_ += s;
    }
    return r;
  }

  std::string outPath(const std::string &file) const {
    return (fs::path(req_.outDir) / file).string();
  }
  Status write(const std::string &file, const HostTensor &t) {
    if (req_.outDir.empty())
      return Status::ok();
    return writeNpy(outPath(file), t);
  }

  Status decodeGs(PipelineResult &res);
  Status decodeRf(PipelineResult &res);
  Status decodeMesh(PipelineResult &res);
  Result<std::vector<RtValue>> decode(const char *fn, const PipelineResult &r) {
    if (!b_.program.find(fn))
      return Error{std::string("the bundle has no ") + fn};
    return stage(fn, "3/3 decoders", {r.coords, r.slat});
  }

  const LoadedBundle &b_;
  const PipelineRequest &req_;
  PipelineObserver &obs_;
  // Set before session_ (which initializes the GPU): the run's wall clock
  // starts there.
  std::chrono::steady_clock::time_point created_;
  Session session_;
  std::vector<std::pair<int64_t, int64_t>> ranges_;
  double stageSeconds_ = 0; // the stages' calls, summed
};

Result<PipelineResult> PipelineRun::run() {
  const Program &program = b_.program;
  const Function *ss = program.find("ss_stage");
  const Function *slat = program.find("slat_stage");
  if (!slat)
    return Error{"the bundle is not a TRELLIS pipeline (no slat_stage); it "
                 "exports: " +
                 [&] {
                   std::string s;
                   for (const auto &e : program.entries())
                     s += (s.empty() ? "" : ", ") + e;
                   return s;
                 }()};
  bool text = slat->argTypes.size() == 4;
  const HostTensor &condIn = req_.cond.tensor;
  HostTensor condT = condIn.dtype() == DType::F32 ? condIn : condIn.toFloat32();
  if (Status s = expectInputType(condT, slat->argTypes[1], req_.cond.what); !s)
    return Error{s.message()};
  std::vector<RtValue> condArgs = {condT};
  if (text) {
    if (!req_.negCond)
      return Error{"this is a text pipeline: --neg-cond FILE (the CLIP "
                   "encoding of \"\") is required"};
    condArgs.push_back(req_.negCond->tensor);
  }
  if (!req_.outDir.empty()) {
    std::error_code ec;
    fs::create_directories(req_.outDir, ec);
    if (ec)
      return Error{"cannot create the output directory '" + req_.outDir +
                   "': " + ec.message()};
  }
  NormalRng rng(req_.seed);
  PipelineResult res;

  // Stage 1: sparse structure (or the given coordinates).
  if (req_.coords) {
    if (Status s = expectInputType(req_.coords->tensor, slat->argTypes[0],
                                   req_.coords->what);
        !s)
      return Error{s.message()};
    res.coords = req_.coords->tensor;
  } else {
    if (!ss)
      return Error{"the bundle has no sparse-structure stage: pass --coords"};
    const ValueType &noiseType = ss->argTypes.back();
    HostTensor noise;
    if (req_.ssNoise) {
      noise = req_.ssNoise->tensor;
      if (Status s = expectInputType(noise, noiseType, req_.ssNoise->what); !s)
        return Error{s.message()};
    } else {
      noise = rng.tensor(noiseType.shape);
    }
    std::vector<RtValue> args = condArgs;
    args.push_back(noise);
    auto r = stage("ss_stage", "1/3 sparse structure", std::move(args));
    if (!r)
      return Error{r.message()};
    res.ssLatent = tensorAt(*r, 0);
    if (Status s = write("ss_latent.npy", res.ssLatent); !s)
      return Error{s.message()};
    res.coords = tensorAt(*r, 1);
    obs_.message("  " + std::to_string(res.coords.dim(0)) + " occupied voxels");
  }
  obs_.coords(res.coords);
  if (Status s = write("coords.npy", res.coords); !s)
    return Error{s.message()};
  if (res.coords.dim(0) == 0)
    return Error{"the sparse structure is empty (no voxel has a logit > 0); "
                 "try another seed or conditioning"};
  if (req_.lastStage <= 1)
    return res;

  // Stage 2: structured latent.
  int64_t n = res.coords.dim(0);
  HostTensor slatNoise;
  const ValueType &slatNoiseType = slat->argTypes.back();
  if (req_.slatNoise) {
    slatNoise = req_.slatNoise->tensor;
    if (slatNoise.rank() != 2 || slatNoise.dim(0) != n ||
        slatNoise.dim(1) != slatNoiseType.shape[1] ||
        slatNoise.dtype() != DType::F32)
      return Error{
          req_.slatNoise->what + " is " + shapeToString(slatNoise.shape()) +
          " " + std::string(dtypeName(slatNoise.dtype())) + ", expected [" +
          std::to_string(n) + ", " + std::to_string(slatNoiseType.shape[1]) +
          "] F32 (one row per voxel, in coordinate order)"};
  } else {
    slatNoise = rng.tensor({n, slatNoiseType.shape[1]});
  }
  std::vector<RtValue> args = {res.coords};
  args.insert(args.end(), condArgs.begin(), condArgs.end());
  args.push_back(slatNoise);
  auto slatR = stage("slat_stage", "2/3 structured latent", std::move(args));
  if (!slatR)
    return Error{slatR.message()};
  res.slat = tensorAt(*slatR, 0);
  if (Status s = write("slat.npy", res.slat); !s)
    return Error{s.message()};
  if (req_.lastStage <= 2)
    return res;

  // Stage 3: decoders. One file per sample (suffix _<b> when several).
  ranges_ = sampleRanges(res.coords);
  if (req_.gs)
    if (Status s = decodeGs(res); !s)
      return Error{s.message()};
  if (req_.rf)
    if (Status s = decodeRf(res); !s)
      return Error{s.message()};
  if (req_.mesh)
    if (Status s = decodeMesh(res); !s)
      return Error{s.message()};
  if (!req_.outDir.empty()) {
    double total = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - created_)
                       .count();
    std::ostringstream line;
    line << "outputs written to " << req_.outDir << "; " << total
         << " s in all: " << stageSeconds_ << " s in the stages, "
         << total - stageSeconds_
         << " s starting the backends, extracting and writing outputs";
    obs_.message(line.str());
  }
  return res;
}

Status PipelineRun::decodeGs(PipelineResult &res) {
  auto r = decode("decode_gs", res);
  if (!r)
    return Error{r.message()};
  res.hasGs = true;
  res.gsXyz = tensorAt(*r, 0);
  res.gsFeaturesDc = tensorAt(*r, 1);
  res.gsScaling = tensorAt(*r, 2);
  res.gsRotation = tensorAt(*r, 3);
  res.gsOpacity = tensorAt(*r, 4);
  if (req_.outDir.empty())
    return Status::ok();
  const int64_t perVoxel = res.gsXyz.dim(0) / res.coords.dim(0);
  for (size_t b = 0; b < ranges_.size(); ++b) {
    auto [begin, end] = ranges_[b];
    auto slice = [&](size_t i) {
      return rows(tensorAt(*r, i), begin * perVoxel, end * perVoxel);
    };
    output::Gaussians g;
    g.xyz = slice(0);
    g.featuresDc = slice(1);
    g.scaling = slice(2);
    g.rotation = slice(3);
    g.opacity = slice(4);
    Status s = output::writeGaussianNpz(
        outPath(perSample("gaussians", ".npz", b, ranges_.size())), g);
    if (s)
      s = output::writeGaussianPly(
          outPath(perSample("gaussians", ".ply", b, ranges_.size())), g);
    if (!s)
      return s;
  }
  return Status::ok();
}

Status PipelineRun::decodeRf(PipelineResult &res) {
  auto r = decode("decode_rf", res);
  if (!r)
    return Error{r.message()};
  res.hasRf = true;
  res.rfTrivec = tensorAt(*r, 0);
  res.rfDensity = tensorAt(*r, 1);
  res.rfFeaturesDc = tensorAt(*r, 2);
  res.rfResolution = int(b_.meta.value("slat_resolution", 64));
  if (req_.outDir.empty())
    return Status::ok();
  for (size_t b = 0; b < ranges_.size(); ++b) {
    auto [begin, end] = ranges_[b];
    output::RadianceField rf;
    rf.coords = rows(res.coords, begin, end);
    rf.trivec = rows(res.rfTrivec, begin, end);
    rf.density = rows(res.rfDensity, begin, end);
    rf.featuresDc = rows(res.rfFeaturesDc, begin, end);
    rf.resolution = res.rfResolution;
    if (Status s = output::writeRadianceFieldNpz(
            outPath(perSample("radiance_field", ".npz", b, ranges_.size())),
            rf);
        !s)
      return s;
  }
  return Status::ok();
}

Status PipelineRun::decodeMesh(PipelineResult &res) {
  auto r = decode("decode_mesh", res);
  if (!r)
    return Error{r.message()};
  res.hasMesh = true;
  res.meshCubes = tensorAt(*r, 0);
  res.meshFields = tensorAt(*r, 1);
  // Seconds since the previous lap: the host side of the mesh outputs is
  // reported by part (it can take longer than the decoder itself).
  auto lap = [t = std::chrono::steady_clock::now()]() mutable {
    auto now = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(now - t).count();
    t = now;
    return s;
  };
  if (!req_.outDir.empty())
    if (Status s = writeNpz(
            outPath("mesh_fields.npz"),
            {{"coords", res.meshCubes}, {"fields", res.meshFields}}, false);
        !s)
      return s;
  // FlexiCubes over the candidate cubes (first sample), then PLY + GLB: on
  // the GPU when the mesh decoder ran there (the same mesh as the CPU
  // reference, runtime/cuda/FlexiCubesGpu.cpp), else on the CPU.
  const double fieldsSeconds = lap();
  int resolution = int(b_.meta.value("slat_resolution", 64)) * 4;
  auto start = std::chrono::steady_clock::now();
  GpuExecutor *gpu = session_.gpuExecutor();
  bool onGpu = gpu && !req_.meshOnCpu &&
               std::string(session_.backend("decode_mesh")) == "cuda";
  Result<mesh::MeshResult> extracted = Error{"not run"};
  if (onGpu) {
    extracted =
        gpu->extractFlexiCubes(res.meshCubes, res.meshFields, resolution);
    if (!extracted) {
      // E.g. a bundle from a trellisc without the FlexiCubes kernels: the
      // CPU reference gives the same mesh (or the same input error).
      obs_.message("  FlexiCubes on the GPU failed (" + extracted.message() +
                   "): extracting on the CPU");
      onGpu = false;
    }
  }
  if (!onGpu)
    extracted =
        mesh::extractFlexiCubes(res.meshCubes, res.meshFields, resolution);
  if (!extracted)
    return Error{extracted.message()};
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::ostringstream line;
  line << "[3/3 decoders] FlexiCubes (" << (onGpu ? "GPU" : "CPU") << ") at "
       << resolution << "^3: " << extracted->vertices.dim(0) << " vertices, "
       << extracted->faces.dim(0) << " faces in " << secs << " s"
       << (ranges_.size() > 1 ? " (first sample only)" : "");
  obs_.message(line.str());
  if (!extracted->success()) {
    obs_.message("  mesh: no surface (mesh.ply/mesh.glb not written)");
    return Status::ok();
  }
  res.meshVertices = extracted->vertices;
  res.meshFaces = extracted->faces;
  lap();
  auto mesh = output::meshFromExtractResult(
      extracted->vertices, extracted->faces, extracted->vertexAttrs);
  if (!mesh)
    return Error{mesh.message()};
  const double buildSeconds = lap();
  if (auto report = output::analyzeMesh(*mesh))
    obs_.message("  mesh: " + output::formatMeshReport(*report));
  const double reportSeconds = lap();
  if (req_.outDir.empty())
    return Status::ok();
  if (Status s = output::writeMeshPly(outPath("mesh.ply"), *mesh); !s)
    return s;
  const double plySeconds = lap();
  auto glb = output::writeMeshGlb(outPath("mesh.glb"), *mesh, {});
  if (!glb)
    return Error{glb.message()};
  std::ostringstream times;
  times << "  mesh outputs: mesh_fields.npz " << fieldsSeconds << " s, mesh "
        << buildSeconds << " s, report " << reportSeconds << " s, mesh.ply "
        << plySeconds << " s, mesh.glb " << lap() << " s";
  obs_.message(times.str());
  return Status::ok();
}

} // namespace

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

Result<PipelineResult> runPipeline(const LoadedBundle &bundle,
                                   const PipelineRequest &request,
                                   PipelineObserver *observer) {
  PipelineObserver none;
  PipelineRun run(bundle, request, observer ? *observer : none);
  return run.run();
}

} // namespace trellis
