//===- Generation.cpp - One generation of the TRELLIS pipeline ------------===//
//
// Stage order, seeded noise, input checks and output files of one generation
// (see Generation.h). The stages run on the caller's thread; every file is a
// job of the engine's OutputWriter, so writing overlaps the next stage. The
// mesh decoder runs first of the three: its host tail (mesh build, PLY, GLB)
// is the longest and goes to the writer while the other decoders compute.
//
//===----------------------------------------------------------------------===//
#include "runtime/app/Generation.h"

#include "trellis/Format/Npy.h"
#include "trellis/Mesh/FlexiCubes.h"
#include "trellis/Output/Gaussians.h"
#include "trellis/Output/Mesh.h"
#include "trellis/Output/RadianceField.h"
#include "trellis/Reference/Parallel.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>
#include <sstream>

#include <unistd.h>

namespace trellis {

namespace fs = std::filesystem;

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

/// Removes from `dir` (not its subfolders) the output files of an earlier
/// run (every name a generation may write, so that a failed run leaves no mix
/// of old and new results) and the temporary files of writers that died
/// (`<name>.tmp-<pid>` of a pid that no longer runs). Other files stay.
Status clearEarlierOutputs(const std::string &dir) {
  static const std::regex temporary(".+\\.tmp-([0-9]+)");
  std::error_code ec;
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file())
      continue;
    const std::string name = e.path().filename().string();
    std::smatch m;
    bool remove = isGenerationOutputName(name);
    if (!remove && std::regex_match(name, m, temporary)) {
      const std::string pid = m[1].str();
      remove =
          pid != std::to_string(::getpid()) && !fs::exists("/proc/" + pid, ec);
    }
    if (remove && !fs::remove(e.path(), ec) && ec)
      return Error{"cannot remove the earlier output '" + e.path().string() +
                   "': " + ec.message()};
  }
  if (ec)
    return Error{"cannot list the output directory '" + dir +
                 "': " + ec.message()};
  return Status::ok();
}

const HostTensor &tensorAt(const std::vector<RtValue> &r, size_t i) {
  return std::get<HostTensor>(r[i]);
}

/// Fails, naming `what`, when floating-point tensor `t` holds a NaN or an
/// infinity (an input: `isInput`; else a stage's result, which points at the
/// weights and inputs and at --check-finite).
Status requireFinite(const HostTensor &t, const std::string &what,
                     bool isInput) {
  if (t.dtype() != DType::F32 && t.dtype() != DType::F16)
    return Status::ok();
  if (t.raw() == nullptr) // a result kept on the device
    return Status::ok();
  // The first non-finite element, on the reference's threads, read in place
  // (a decoder's results are ~10M values on a generation's critical path;
  // f16 by its exponent bits: all ones is an infinity or a NaN).
  const int64_t n = t.numel();
  const bool half = t.dtype() == DType::F16;
  const auto *f32 = static_cast<const float *>(t.raw());
  const auto *f16 = static_cast<const uint16_t *>(t.raw());
  auto finite = [&](int64_t i) {
    return half ? (f16[i] & 0x7C00) != 0x7C00 : std::isfinite(f32[i]);
  };
  std::atomic<int64_t> first{n};
  ref::parallelFor(n, int64_t(1) << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      if (!finite(i)) {
        int64_t seen = first.load();
        while (i < seen && !first.compare_exchange_weak(seen, i)) {
        }
        return;
      }
  });
  const int64_t i = first.load();
  if (i == n)
    return Status::ok();
  const bool nan = half ? (f16[i] & 0x03FF) != 0 : std::isnan(f32[i]);
  std::string found = nan ? "NaN" : "an infinity";
  if (isInput)
    return Error{what + " holds " + found + " (element " + std::to_string(i) +
                 "): inputs must be finite"};
  return Error{what + " came out with " + found + " (element " +
               std::to_string(i) +
               "): a weight or an input holds NaN/Inf, or the math "
               "overflowed; rerun with --check-finite to name the first op "
               "that produced one"};
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

class Generation {
public:
  Generation(const LoadedBundle &b, Session &session, OutputWriter &writer,
             const GenerationRequest &req, PipelineObserver &obs,
             GenerationStats &stats,
             const std::function<Status(int64_t)> &voxelsKnown)
      : b_(b), session_(session), writer_(writer), req_(req), obs_(obs),
        stats_(stats), voxelsKnown_(voxelsKnown) {}

  Result<PipelineResult> run();

private:
  Result<std::vector<RtValue>>
  stage(const char *name, const char *title, std::vector<RtValue> args,
        const std::vector<bool> *deviceOnly = nullptr);
  Result<std::vector<RtValue>> condArguments();
  /// cond from req_.images through the program's image_stage.
  Result<HostTensor> imageConditioning();
  Status sparseStructure(const std::vector<RtValue> &condArgs, NormalRng &rng,
                         PipelineResult &res);
  Status structuredLatent(const std::vector<RtValue> &condArgs, NormalRng &rng,
                          PipelineResult &res);
  Status decodeGs(PipelineResult &res);
  Status decodeRf(PipelineResult &res);
  Status decodeMesh(PipelineResult &res);
  Status extractMesh(PipelineResult &res);
  Result<std::vector<RtValue>> decode(const char *fn, const PipelineResult &r) {
    if (!b_.program.find(fn))
      return Error{std::string("the bundle has no ") + fn};
    return stage(fn, "3/3 decoders", {r.coords, r.slat});
  }

  std::string outPath(const std::string &file) const {
    return (fs::path(req_.outDir) / file).string();
  }
  /// Queues a file for the writer thread (nothing without an output dir).
  void write(const std::string &file,
             std::function<Status(const std::string &)> writeTo) {
    if (req_.outDir.empty())
      return;
    std::string path = outPath(file);
    stats_.files.push_back(path);
    writer_.submit(
        path, [path, writeTo = std::move(writeTo)] { return writeTo(path); });
  }
  void writeArray(const std::string &file, HostTensor t) {
    write(file, [t](const std::string &path) { return writeNpy(path, t); });
  }

  const LoadedBundle &b_;
  Session &session_;
  OutputWriter &writer_;
  const GenerationRequest &req_;
  PipelineObserver &obs_;
  GenerationStats &stats_;
  const std::function<Status(int64_t)> &voxelsKnown_;
  std::vector<std::pair<int64_t, int64_t>> ranges_;
};

Result<std::vector<RtValue>>
Generation::stage(const char *name, const char *title,
                  std::vector<RtValue> args,
                  const std::vector<bool> *deviceOnly) {
  auto start = std::chrono::steady_clock::now();
  obs_.stageBegin(name, title);
  obs_.message(std::string("[") + title + "] running " + name);
  auto r = session_.call(name, std::move(args), deviceOnly);
  double s = secondsSince(start);
  if (!r)
    return r;
  std::ostringstream line;
  line << "[" << title << "] done in " << s << " s";
  if (std::string(session_.backend(name)) == "cuda") {
    const GpuReport &g = *session_.gpuReport();
    stats_.gpuSeconds += g.runSeconds;
    stats_.setupSeconds += g.weightUploadSeconds + g.planSeconds +
                           g.uploadSeconds + g.commandSeconds;
    stats_.downloadSeconds += g.downloadSeconds;
    line << " on the GPU (" << g.runSeconds << " s of GPU time";
    if (g.weightUploadSeconds > 0)
      line << ", " << (g.weightBytes >> 20) << " MiB weights staged in "
           << g.weightUploadSeconds << " s";
    if (g.planSeconds + g.commandSeconds > 0)
      line << ", " << (g.arenaBytes >> 20) << " MiB arena; host setup: plan "
           << g.planSeconds << " s, uploads " << g.uploadSeconds
           << " s, commands " << g.commandSeconds << " s";
    if (g.backgroundSetupSeconds > 0)
      line << "; made resident in the background (" << g.backgroundSetupSeconds
           << " s, off the critical path)";
    line << "; results downloaded in " << g.downloadSeconds
         << " s; device memory " << (g.bytesInUse >> 20) << " MiB held, peak "
         << (g.peakBytesInUse >> 20) << " MiB of the " << (g.memoryBudget >> 20)
         << " MiB budget)";
    if (g.checkedOps)
      line << "; " << g.checkedOps
           << " op results matched the CPU reference (worst relative L2 "
           << g.worstCheckError << ")";
  }
  obs_.message(line.str());
  obs_.stageEnd(name, title, s);
  return r;
}

Result<HostTensor> Generation::imageConditioning() {
  const Function *image = b_.program.find("image_stage");
  if (!image)
    return Error{"this program takes conditioning tokens only (--cond): it "
                 "was compiled without the image-conditioning model (compile "
                 "with <model dir>/image_cond_model/config.json and "
                 "model.safetensors present, or trellisc --image-model DIR)"};
  TRELLIS_RETURN_IF_ERROR(expectInputType(
      req_.images->tensor, image->argTypes[0], req_.images->what));
  auto r =
      stage("image_stage", "0/3 image conditioning", {req_.images->tensor});
  if (!r)
    return r.takeError();
  return tensorAt(*r, 0);
}

Result<std::vector<RtValue>> Generation::condArguments() {
  const Function *slat = b_.program.find("slat_stage");
  if (!slat)
    return Error{"the bundle is not a TRELLIS pipeline (no slat_stage); it "
                 "exports: " +
                 [&] {
                   std::string s;
                   for (const auto &e : b_.program.entries())
                     s += (s.empty() ? "" : ", ") + e;
                   return s;
                 }()};
  HostTensor condT;
  std::string condWhat = req_.cond.what;
  if (req_.images) {
    TRELLIS_ASSIGN_OR_RETURN(condT, imageConditioning());
    condWhat = "the image-conditioning model's tokens";
  } else {
    const HostTensor &condIn = req_.cond.tensor;
    condT = condIn.dtype() == DType::F32 ? condIn : condIn.toFloat32();
  }
  TRELLIS_RETURN_IF_ERROR(expectInputType(condT, slat->argTypes[1], condWhat));
  TRELLIS_RETURN_IF_ERROR(requireFinite(condT, condWhat, true));
  std::vector<RtValue> condArgs = {condT};
  if (slat->argTypes.size() ==
      4) { // a text pipeline: (coords, cond, neg, noise)
    if (!req_.negCond)
      return Error{"this is a text pipeline: --neg-cond FILE (the CLIP "
                   "encoding of \"\") is required"};
    TRELLIS_RETURN_IF_ERROR(expectInputType(
        req_.negCond->tensor, slat->argTypes[2], req_.negCond->what));
    TRELLIS_RETURN_IF_ERROR(
        requireFinite(req_.negCond->tensor, req_.negCond->what, true));
    condArgs.push_back(req_.negCond->tensor);
  }
  return condArgs;
}

Status Generation::sparseStructure(const std::vector<RtValue> &condArgs,
                                   NormalRng &rng, PipelineResult &res) {
  const Function *slat = b_.program.find("slat_stage");
  if (req_.coords) {
    TRELLIS_RETURN_IF_ERROR(expectInputType(
        req_.coords->tensor, slat->argTypes[0], req_.coords->what));
    // A copy: the writer may read it after the caller's buffer is gone.
    res.coords = req_.coords->tensor.clone();
    if (!req_.stage1WithCoords)
      return Status::ok();
  }
  const Function *ss = b_.program.find("ss_stage");
  if (!ss)
    return Error{"the bundle has no sparse-structure stage: pass --coords"};
  const ValueType &noiseType = ss->argTypes.back();
  HostTensor noise;
  if (req_.ssNoise) {
    noise = req_.ssNoise->tensor;
    TRELLIS_RETURN_IF_ERROR(
        expectInputType(noise, noiseType, req_.ssNoise->what));
    TRELLIS_RETURN_IF_ERROR(requireFinite(noise, req_.ssNoise->what, true));
  } else {
    noise = rng.tensor(noiseType.shape);
  }
  std::vector<RtValue> args = condArgs;
  args.push_back(noise);
  auto r = stage("ss_stage", "1/3 sparse structure", std::move(args));
  if (!r)
    return r.status();
  res.ssLatent = tensorAt(*r, 0);
  // NaN logits make an empty structure: say so rather than blame the seed.
  TRELLIS_RETURN_IF_ERROR(requireFinite(
      res.ssLatent, "stage 1's latent (ss_latent.npy, not written)", false));
  writeArray("ss_latent.npy", res.ssLatent);
  const int64_t found = tensorAt(*r, 1).dim(0);
  if (req_.coords) { // stage1WithCoords: its voxels make way for the given
    obs_.message(
        "  " + std::to_string(found) + " occupied voxels, replaced by the " +
        std::to_string(res.coords.dim(0)) + " of " + req_.coords->what);
    return Status::ok();
  }
  res.coords = tensorAt(*r, 1);
  obs_.message("  " + std::to_string(found) + " occupied voxels");
  return Status::ok();
}

Status Generation::structuredLatent(const std::vector<RtValue> &condArgs,
                                    NormalRng &rng, PipelineResult &res) {
  const Function *slat = b_.program.find("slat_stage");
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
    TRELLIS_RETURN_IF_ERROR(
        requireFinite(slatNoise, req_.slatNoise->what, true));
  } else {
    slatNoise = rng.tensor({n, slatNoiseType.shape[1]});
  }
  std::vector<RtValue> args = {res.coords};
  args.insert(args.end(), condArgs.begin(), condArgs.end());
  args.push_back(slatNoise);
  auto r = stage("slat_stage", "2/3 structured latent", std::move(args));
  if (!r)
    return r.status();
  res.slat = tensorAt(*r, 0);
  TRELLIS_RETURN_IF_ERROR(requireFinite(
      res.slat, "stage 2's latent (slat.npy, not written)", false));
  writeArray("slat.npy", res.slat);
  return Status::ok();
}

Result<PipelineResult> Generation::run() {
  // The inputs first: a bad one leaves no output directory behind.
  auto condArgs = condArguments();
  if (!condArgs)
    return Error{condArgs.message()};
  if (!req_.outDir.empty()) {
    std::error_code ec;
    fs::create_directories(req_.outDir, ec);
    if (ec)
      return Error{"cannot create the output directory '" + req_.outDir +
                   "': " + ec.message()};
    TRELLIS_RETURN_IF_ERROR(clearEarlierOutputs(req_.outDir));
  }
  if (req_.saveCond) {
    writeArray("cond_tokens.npy", std::get<HostTensor>(condArgs->front()));
    if (req_.condImages)
      writeArray("cond_image.npy", *req_.condImages);
  }
  NormalRng rng(req_.seed);
  PipelineResult res;
  if (req_.images)
    res.cond = std::get<HostTensor>(condArgs->front());

  TRELLIS_RETURN_IF_ERROR(sparseStructure(*condArgs, rng, res));
  stats_.voxels = res.coords.dim(0);
  obs_.coords(res.coords);
  writeArray("coords.npy", res.coords);
  if (res.coords.dim(0) == 0)
    return Error{"the sparse structure is empty (no voxel has a logit > 0); "
                 "try another seed or conditioning"};
  if (req_.lastStage <= 1)
    return res;
  if (voxelsKnown_)
    TRELLIS_RETURN_IF_ERROR(voxelsKnown_(res.coords.dim(0)));

  // The decoders' binding to this voxel set (host work) is planned on other
  // threads while the GPU runs the SLat stage; only the latent's shape
  // matters to it.
  if (req_.lastStage >= 3) {
    const Function *slat = b_.program.find("slat_stage");
    HostTensor latent(DType::F32,
                      {res.coords.dim(0), slat->argTypes.back().shape[1]});
    std::memset(latent.mutableRaw(), 0, latent.nbytes());
    for (auto [wanted, fn] : {std::pair{req_.mesh, "decode_mesh"},
                              {req_.gs, "decode_gs"},
                              {req_.rf, "decode_rf"}})
      if (wanted && b_.program.find(fn))
        session_.prepareInBackground(fn, {res.coords, latent});
  }
  TRELLIS_RETURN_IF_ERROR(structuredLatent(*condArgs, rng, res));
  if (req_.lastStage <= 2)
    return res;

  // Stage 3: decoders. One file per sample (suffix _<b> when several).
  ranges_ = sampleRanges(res.coords);
  if (req_.mesh)
    TRELLIS_RETURN_IF_ERROR(decodeMesh(res));
  if (req_.gs)
    TRELLIS_RETURN_IF_ERROR(decodeGs(res));
  if (req_.rf)
    TRELLIS_RETURN_IF_ERROR(decodeRf(res));
  return res;
}

Status Generation::decodeGs(PipelineResult &res) {
  auto r = decode("decode_gs", res);
  if (!r)
    return r.status();
  res.hasGs = true;
  res.gsXyz = tensorAt(*r, 0);
  res.gsFeaturesDc = tensorAt(*r, 1);
  res.gsScaling = tensorAt(*r, 2);
  res.gsRotation = tensorAt(*r, 3);
  res.gsOpacity = tensorAt(*r, 4);
  for (const HostTensor *t : {&res.gsXyz, &res.gsFeaturesDc, &res.gsScaling,
                              &res.gsRotation, &res.gsOpacity})
    TRELLIS_RETURN_IF_ERROR(requireFinite(
        *t, "the Gaussians (gaussians.ply / .npz, not written)", false));
  const int64_t perVoxel = res.gsXyz.dim(0) / res.coords.dim(0);
  for (size_t b = 0; b < ranges_.size(); ++b) {
    auto [begin, end] = ranges_[b];
    auto slice = [&](const HostTensor &t) {
      return rows(t, begin * perVoxel, end * perVoxel);
    };
    output::Gaussians g;
    g.xyz = slice(res.gsXyz);
    g.featuresDc = slice(res.gsFeaturesDc);
    g.scaling = slice(res.gsScaling);
    g.rotation = slice(res.gsRotation);
    g.opacity = slice(res.gsOpacity);
    write(perSample("gaussians", ".npz", b, ranges_.size()),
          [g](const std::string &path) {
            return output::writeGaussianNpz(path, g);
          });
    write(perSample("gaussians", ".ply", b, ranges_.size()),
          [g](const std::string &path) {
            return output::writeGaussianPly(path, g);
          });
  }
  return Status::ok();
}

Status Generation::decodeRf(PipelineResult &res) {
  auto r = decode("decode_rf", res);
  if (!r)
    return r.status();
  res.hasRf = true;
  res.rfTrivec = tensorAt(*r, 0);
  res.rfDensity = tensorAt(*r, 1);
  res.rfFeaturesDc = tensorAt(*r, 2);
  for (const HostTensor *t : {&res.rfTrivec, &res.rfDensity, &res.rfFeaturesDc})
    TRELLIS_RETURN_IF_ERROR(requireFinite(
        *t, "the radiance field (radiance_field.npz, not written)", false));
  res.rfResolution = int(b_.meta.value("slat_resolution", 64));
  for (size_t b = 0; b < ranges_.size(); ++b) {
    auto [begin, end] = ranges_[b];
    output::RadianceField rf;
    rf.coords = rows(res.coords, begin, end);
    rf.trivec = rows(res.rfTrivec, begin, end);
    rf.density = rows(res.rfDensity, begin, end);
    rf.featuresDc = rows(res.rfFeaturesDc, begin, end);
    rf.resolution = res.rfResolution;
    write(perSample("radiance_field", ".npz", b, ranges_.size()),
          [rf](const std::string &path) {
            return output::writeRadianceFieldNpz(path, rf);
          });
  }
  return Status::ok();
}

Status Generation::decodeMesh(PipelineResult &res) {
  if (!b_.program.find("decode_mesh"))
    return Error{"the bundle has no decode_mesh"};
  // The fields (0.2-0.5 GB) stay on the device when only FlexiCubes on the
  // GPU reads them.
  const bool fieldsOnDevice =
      !req_.keepMeshFields && !req_.debugOutputs && !req_.meshOnCpu &&
      std::string(session_.backend("decode_mesh")) == "cuda";
  const std::vector<bool> deviceOnly = {false, fieldsOnDevice};
  auto r =
      stage("decode_mesh", "3/3 decoders", {res.coords, res.slat}, &deviceOnly);
  if (!r)
    return r.status();
  res.hasMesh = true;
  res.meshCubes = tensorAt(*r, 0);
  res.meshFields = tensorAt(*r, 1);
  if (req_.debugOutputs) {
    HostTensor cubes = res.meshCubes, fields = res.meshFields;
    write("mesh_fields.npz", [cubes, fields](const std::string &path) {
      return writeNpz(path, {{"coords", cubes}, {"fields", fields}}, false);
    });
  }
  Status extracted = extractMesh(res);
  if (!res.meshFields.raw())
    res.meshFields = HostTensor(); // kept on the device: not a result
  return extracted;
}

/// FlexiCubes over the candidate cubes (first sample): on the GPU when the
/// mesh decoder ran there (the same mesh as the CPU reference,
/// runtime/cuda/FlexiCubesGpu.cpp), else on the CPU. The mesh's PLY and GLB
/// are built and written by the writer thread.
Status Generation::extractMesh(PipelineResult &res) {
  int resolution = int(b_.meta.value("slat_resolution", 64)) * 4;
  auto start = std::chrono::steady_clock::now();
  GpuExecutor *gpu = session_.gpuExecutor();
  bool onGpu = gpu && !req_.meshOnCpu &&
               std::string(session_.backend("decode_mesh")) == "cuda";
  Result<mesh::MeshResult> extracted = Error{"not run"};
  if (onGpu) {
    extracted =
        gpu->extractFlexiCubes(res.meshCubes, res.meshFields, resolution);
    if (extracted) {
      const GpuReport &g = gpu->report();
      stats_.gpuSeconds +=
          (g.flexiUploadMs + g.flexiComputeMs + g.flexiDownloadMs) / 1e3;
    } else {
      // E.g. a bundle from a trellisc without the FlexiCubes kernels: the
      // CPU reference gives the same mesh (or the same input error), if
      // the fields came to the host.
      if (!res.meshFields.raw())
        return extracted.status();
      obs_.message("  FlexiCubes on the GPU failed (" + extracted.message() +
                   "): extracting on the CPU");
      onGpu = false;
    }
  }
  if (!onGpu)
    extracted =
        mesh::extractFlexiCubes(res.meshCubes, res.meshFields, resolution);
  if (!extracted)
    return extracted.status();
  std::ostringstream line;
  line << "[3/3 decoders] FlexiCubes (" << (onGpu ? "GPU" : "CPU") << ") at "
       << resolution << "^3: " << extracted->vertices.dim(0) << " vertices, "
       << extracted->faces.dim(0) << " faces in " << secondsSince(start) << " s"
       << (ranges_.size() > 1 ? " (first sample only)" : "");
  obs_.message(line.str());
  if (!extracted->success()) {
    obs_.message("  mesh: no surface (mesh.ply/mesh.glb not written)");
    return Status::ok();
  }
  res.meshVertices = extracted->vertices;
  res.meshFaces = extracted->faces;
  if (req_.debugOutputs) {
    auto mesh = output::meshFromExtractResult(
        extracted->vertices, extracted->faces, extracted->vertexAttrs);
    if (!mesh)
      return mesh.status();
    if (auto report = output::analyzeMesh(*mesh))
      obs_.message("  mesh: " + output::formatMeshReport(*report));
  }
  if (req_.outDir.empty())
    return Status::ok();
  // One job builds the mesh and writes both files (PLY first, as before).
  auto shared = std::make_shared<mesh::MeshResult>(std::move(*extracted));
  std::string ply = outPath("mesh.ply"), glb = outPath("mesh.glb");
  stats_.files.push_back(ply);
  stats_.files.push_back(glb);
  writer_.submit(ply + ", " + glb, [shared, ply, glb]() -> Status {
    auto mesh = output::meshFromExtractResult(shared->vertices, shared->faces,
                                              shared->vertexAttrs);
    if (!mesh)
      return mesh.status();
    TRELLIS_RETURN_IF_ERROR(output::writeMeshPly(ply, *mesh));
    auto written = output::writeMeshGlb(glb, *mesh, {});
    return written ? Status::ok() : written.status();
  });
  return Status::ok();
}

} // namespace

bool isGenerationOutputName(const std::string &name) {
  static const std::regex outputs(
      "(ss_latent|coords|slat|cond_tokens|cond_image)\\.npy|(gaussians(_[0-9]+)"
      "?\\.(ply|npz))|"
      "(radiance_field(_[0-9]+)?\\.npz)|(mesh(_[0-9]+)?\\.(ply|glb))|"
      "(mesh_fields(_[0-9]+)?\\.npz)");
  return std::regex_match(name, outputs);
}

Result<PipelineResult>
runGeneration(const LoadedBundle &bundle, Session &session,
              OutputWriter &writer, const GenerationRequest &request,
              PipelineObserver &observer, GenerationStats &stats,
              const std::function<Status(int64_t)> &voxelsKnown) {
  Generation generation(bundle, session, writer, request, observer, stats,
                        voxelsKnown);
  return generation.run();
}

} // namespace trellis
