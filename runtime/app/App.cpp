//===- App.cpp - The trellis.exe command line -------------------------------===//
//
// Loads the bundle (embedded, or --bundle), binds the checkpoints of --model,
// runs the pipeline's stage functions on the CPU reference backend and writes
// the outputs. Every output goes through an AtomicFile.
//
//===----------------------------------------------------------------------===//
#include "trellis/Runtime/App.h"

#include "trellis/Format/Npy.h"
#include "trellis/Format/Safetensors.h"
#include "trellis/Mesh/FlexiCubes.h"
#include "trellis/Output/Mesh.h"
#include "trellis/Output/Gaussians.h"
#include "trellis/Output/RadianceField.h"
#include "trellis/Reference/Parallel.h"
#include "trellis/Runtime/Bundle.h"
#include "trellis/Runtime/CpuExecutor.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

namespace trellis {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char *const kUsage = R"(trellis.exe: the TRELLIS image-to-3D pipeline, compiled by trellisc

usage: trellis.exe --model DIR --cond FILE --out DIR [options]
       trellis.exe --inspect

  --model DIR          TRELLIS model directory (its ckpts/*.safetensors are
                       mapped, never copied whole)
  --cond FILE          conditioning tokens, .npy or .npz (first array),
                       f32 [images, Lc, Cc] (post-LayerNorm DINOv2 tokens)
  --neg-cond FILE      unconditional tokens (text pipelines: CLIP(""))
  --out DIR            output directory (created)
  --seed N             noise seed (default 42)
  --ss-noise FILE      sparse-structure noise [B,8,R,R,R] f32 instead of the seed
  --slat-noise FILE    structured-latent noise [N,8] f32 instead of the seed
  --coords FILE        int32 [N,4] coordinates: skip stage 1 (variants of a shape)
  --formats LIST       decoders to run: gs,rf,mesh (default all)
  --steps-ss N --cfg-ss W --steps-slat N --cfg-slat W
                       override the compiled sampler steps / CFG strength
  --threads N          CPU threads (default: all)
  --check-finite       stop at the first op producing NaN/Inf, naming it
  --bundle FILE        run this bundle (for the bare trellis-runtime)
  --inspect            print the bundle (format, sections, functions, weights)

outputs: ss_latent.npy coords.npy slat.npy gaussians.ply gaussians.npz
         radiance_field.npz mesh_fields.npz mesh.ply mesh.glb (per-sample
         files get a _<b>
         suffix when the program was compiled with --batch > 1)
)";

struct Options {
  std::string model, cond, negCond, out, ssNoise, slatNoise, coords, bundle;
  uint64_t seed = 42;
  bool gs = true, rf = true, mesh = true;
  SamplerRunOverrides ss, slat;
  int threads = 0;
  bool checkFinite = false, inspect = false, help = false;
};

Result<Options> parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> Result<std::string> {
      if (i + 1 >= argc)
        return Error{"option " + a + " needs a value"};
      return std::string(argv[++i]);
    };
    auto number = [&](auto &dst) -> Status {
      auto v = value();
      if (!v)
        return v.status();
      try {
        size_t used = 0;
        double d = std::stod(*v, &used);
        if (used != v->size())
          throw std::invalid_argument(*v);
        dst = static_cast<std::remove_reference_t<decltype(dst)>>(d);
      } catch (...) {
        return Error{"option " + a + " expects a number, found '" + *v + "'"};
      }
      return Status::ok();
    };
    Status s;
    auto str = [&](std::string &dst) -> Status {
      auto v = value();
      if (!v)
        return v.status();
      dst = *v;
      return Status::ok();
    };
    if (a == "--help" || a == "-h")
      o.help = true;
    else if (a == "--inspect")
      o.inspect = true;
    else if (a == "--check-finite")
      o.checkFinite = true;
    else if (a == "--model")
      s = str(o.model);
    else if (a == "--cond")
      s = str(o.cond);
    else if (a == "--neg-cond")
      s = str(o.negCond);
    else if (a == "--out")
      s = str(o.out);
    else if (a == "--ss-noise")
      s = str(o.ssNoise);
    else if (a == "--slat-noise")
      s = str(o.slatNoise);
    else if (a == "--coords")
      s = str(o.coords);
    else if (a == "--bundle")
      s = str(o.bundle);
    else if (a == "--seed")
      s = number(o.seed);
    else if (a == "--threads")
      s = number(o.threads);
    else if (a == "--steps-ss" || a == "--steps-slat") {
      int64_t n = 0;
      s = number(n);
      if (s && n < 1)
        s = Error{"option " + a + " must be >= 1"};
      (a == "--steps-ss" ? o.ss : o.slat).steps = n;
    } else if (a == "--cfg-ss" || a == "--cfg-slat") {
      double w = 0;
      s = number(w);
      if (s && w < 0)
        s = Error{"option " + a + " must be >= 0"};
      (a == "--cfg-ss" ? o.ss : o.slat).cfgStrength = w;
    } else if (a == "--formats") {
      std::string list;
      s = str(list);
      o.gs = o.rf = o.mesh = false;
      std::stringstream ss(list);
      std::string f;
      while (s && std::getline(ss, f, ',')) {
        if (f == "gs")
          o.gs = true;
        else if (f == "rf")
          o.rf = true;
        else if (f == "mesh")
          o.mesh = true;
        else
          s = Error{"--formats: unknown format '" + f +
                    "' (expected gs, rf, mesh)"};
      }
    } else {
      s = Error{"unknown option '" + a + "' (see --help)"};
    }
    if (!s)
      return Error{s.message()};
  }
  return o;
}

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

Result<HostTensor> readArray(const std::string &path, const char *what) {
  if (fs::path(path).extension() == ".npz") {
    auto entries = readNpz(path);
    if (!entries)
      return Error{std::string(what) + ": " + entries.message()};
    if (entries->empty())
      return Error{std::string(what) + ": '" + path + "' holds no array"};
    return entries->front().second;
  }
  auto t = readNpy(path);
  if (!t)
    return Error{std::string(what) + ": " + t.message()};
  return *t;
}

/// Checks an input against the entry function's argument type.
Status expectShape(const HostTensor &t, const ValueType &type,
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

int fail(const std::string &message) {
  std::cerr << "trellis.exe: error: " << message << "\n";
  return 1;
}

class Runner {
public:
  Runner(const Options &o, const Program &p, json meta, json weights)
      : o_(o), program_(p), meta_(std::move(meta)), weights_(std::move(weights)),
        exec_(p, [this](const std::string &m, const std::string &n) {
          return weight(m, n);
        }) {
    exec_.setCheckFinite(o.checkFinite);
    exec_.setSamplerOverrides("ss_stage", o.ss);
    exec_.setSamplerOverrides("slat_stage", o.slat);
    exec_.setStepCallback([](const std::string &fn, int64_t k, int64_t n) {
      std::cerr << "\r  " << fn << ": step " << k << "/" << n
                << (k == n ? "\n" : "") << std::flush;
    });
  }

  int run();

private:
  Result<HostTensor> weight(const std::string &model, const std::string &name) {
    auto it = files_.find(model);
    if (it == files_.end()) {
      if (!weights_.contains(model))
        return Error{"the bundle lists no checkpoint for model '" + model +
                     "'"};
      std::string path =
          (fs::path(o_.model) / weights_[model].get<std::string>()).string();
      auto file = SafetensorsFile::open(path);
      if (!file)
        return Error{file.message()};
      it = files_.emplace(model, *file).first;
    }
    const SafetensorsEntry *e = it->second->find(name);
    if (!e)
      return Error{"tensor '" + name + "' is missing from " +
                   it->second->path()};
    return it->second->tensor(*e);
  }

  Result<std::vector<RtValue>> stage(const char *name, const char *title,
                                     std::vector<RtValue> args) {
    auto start = std::chrono::steady_clock::now();
    std::cerr << "[" << title << "] running " << name << "\n";
    auto r = exec_.run(name, std::move(args));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                             start)
                   .count();
    if (r)
      std::cerr << "[" << title << "] done in " << s << " s\n";
    return r;
  }

  Status write(const std::string &file, const HostTensor &t) {
    return writeNpy((fs::path(o_.out) / file).string(), t);
  }

  const Options &o_;
  const Program &program_;
  json meta_, weights_;
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> files_;
  CpuExecutor exec_;
};

int Runner::run() {
  const Function *ss = program_.find("ss_stage");
  const Function *slat = program_.find("slat_stage");
  if (!slat)
    return fail("the bundle is not a TRELLIS pipeline (no slat_stage); it "
                "exports: " + [&] {
                  std::string s;
                  for (const auto &e : program_.entries())
                    s += (s.empty() ? "" : ", ") + e;
                  return s;
                }());
  bool text = slat->argTypes.size() == 4;
  auto cond = readArray(o_.cond, "--cond");
  if (!cond)
    return fail(cond.message());
  HostTensor condT = cond->dtype() == DType::F32 ? *cond : cond->toFloat32();
  if (Status s = expectShape(condT, slat->argTypes[1], "--cond " + o_.cond); !s)
    return fail(s.message());
  std::vector<RtValue> condArgs = {condT};
  if (text) {
    if (o_.negCond.empty())
      return fail("this is a text pipeline: --neg-cond FILE (the CLIP "
                  "encoding of \"\") is required");
    auto neg = readArray(o_.negCond, "--neg-cond");
    if (!neg)
      return fail(neg.message());
    condArgs.push_back(*neg);
  }
  std::error_code ec;
  fs::create_directories(o_.out, ec);
  if (ec)
    return fail("cannot create the output directory '" + o_.out +
                "': " + ec.message());
  NormalRng rng(o_.seed);

  // Stage 1: sparse structure (or the given coordinates).
  HostTensor coords;
  if (!o_.coords.empty()) {
    auto c = readArray(o_.coords, "--coords");
    if (!c)
      return fail(c.message());
    if (Status s = expectShape(*c, slat->argTypes[0], "--coords " + o_.coords);
        !s)
      return fail(s.message());
    coords = *c;
  } else {
    if (!ss)
      return fail("the bundle has no sparse-structure stage: pass --coords");
    const ValueType &noiseType = ss->argTypes.back();
    HostTensor noise;
    if (!o_.ssNoise.empty()) {
      auto n = readArray(o_.ssNoise, "--ss-noise");
      if (!n)
        return fail(n.message());
      noise = *n;
      if (Status s = expectShape(noise, noiseType, "--ss-noise"); !s)
        return fail(s.message());
    } else {
      noise = rng.tensor(noiseType.shape);
    }
    std::vector<RtValue> args = condArgs;
    args.push_back(noise);
    auto r = stage("ss_stage", "1/3 sparse structure", std::move(args));
    if (!r)
      return fail(r.message());
    if (Status s = write("ss_latent.npy", std::get<HostTensor>((*r)[0])); !s)
      return fail(s.message());
    coords = std::get<HostTensor>((*r)[1]);
    std::cerr << "  " << coords.dim(0) << " occupied voxels\n";
  }
  if (Status s = write("coords.npy", coords); !s)
    return fail(s.message());
  if (coords.dim(0) == 0)
    return fail("the sparse structure is empty (no voxel has a logit > 0); "
                "try another seed or conditioning");

  // Stage 2: structured latent.
  int64_t n = coords.dim(0);
  HostTensor slatNoise;
  const ValueType &slatNoiseType = slat->argTypes.back();
  if (!o_.slatNoise.empty()) {
    auto sn = readArray(o_.slatNoise, "--slat-noise");
    if (!sn)
      return fail(sn.message());
    slatNoise = *sn;
    if (slatNoise.rank() != 2 || slatNoise.dim(0) != n ||
        slatNoise.dim(1) != slatNoiseType.shape[1] ||
        slatNoise.dtype() != DType::F32)
      return fail("--slat-noise is " + shapeToString(slatNoise.shape()) +
                  " " + std::string(dtypeName(slatNoise.dtype())) +
                  ", expected [" + std::to_string(n) + ", " +
                  std::to_string(slatNoiseType.shape[1]) +
                  "] F32 (one row per voxel, in coordinate order)");
  } else {
    slatNoise = rng.tensor({n, slatNoiseType.shape[1]});
  }
  std::vector<RtValue> args = {coords};
  args.insert(args.end(), condArgs.begin(), condArgs.end());
  args.push_back(slatNoise);
  auto slatR = stage("slat_stage", "2/3 structured latent", std::move(args));
  if (!slatR)
    return fail(slatR.message());
  HostTensor slatT = std::get<HostTensor>((*slatR)[0]);
  if (Status s = write("slat.npy", slatT); !s)
    return fail(s.message());

  // Stage 3: decoders.
  auto decode = [&](const char *fn) -> Result<std::vector<RtValue>> {
    if (!program_.find(fn))
      return Error{std::string("the bundle has no ") + fn};
    return stage(fn, "3/3 decoders", {coords, slatT});
  };
  // One file per sample (suffix _<b> when the run has several).
  auto ranges = sampleRanges(coords);
  if (o_.gs) {
    auto r = decode("decode_gs");
    if (!r)
      return fail(r.message());
    const int64_t perVoxel = std::get<HostTensor>((*r)[0]).dim(0) / n;
    for (size_t b = 0; b < ranges.size(); ++b) {
      auto [begin, end] = ranges[b];
      auto slice = [&](size_t i) {
        return rows(std::get<HostTensor>((*r)[i]), begin * perVoxel,
                    end * perVoxel);
      };
      output::Gaussians g;
      g.xyz = slice(0);
      g.featuresDc = slice(1);
      g.scaling = slice(2);
      g.rotation = slice(3);
      g.opacity = slice(4);
      Status s = output::writeGaussianNpz(
          (fs::path(o_.out) / perSample("gaussians", ".npz", b, ranges.size()))
              .string(),
          g);
      if (s)
        s = output::writeGaussianPly(
            (fs::path(o_.out) /
             perSample("gaussians", ".ply", b, ranges.size()))
                .string(),
            g);
      if (!s)
        return fail(s.message());
    }
  }
  if (o_.rf) {
    auto r = decode("decode_rf");
    if (!r)
      return fail(r.message());
    for (size_t b = 0; b < ranges.size(); ++b) {
      auto [begin, end] = ranges[b];
      output::RadianceField rf;
      rf.coords = rows(coords, begin, end);
      rf.trivec = rows(std::get<HostTensor>((*r)[0]), begin, end);
      rf.density = rows(std::get<HostTensor>((*r)[1]), begin, end);
      rf.featuresDc = rows(std::get<HostTensor>((*r)[2]), begin, end);
      rf.resolution = int(meta_.value("slat_resolution", 64));
      if (Status s = output::writeRadianceFieldNpz(
              (fs::path(o_.out) /
               perSample("radiance_field", ".npz", b, ranges.size()))
                  .string(),
              rf);
          !s)
        return fail(s.message());
    }
  }
  if (o_.mesh) {
    auto r = decode("decode_mesh");
    if (!r)
      return fail(r.message());
    const HostTensor &cubes = std::get<HostTensor>((*r)[0]);
    const HostTensor &fields = std::get<HostTensor>((*r)[1]);
    if (Status s = writeNpz((fs::path(o_.out) / "mesh_fields.npz").string(),
                            {{"coords", cubes}, {"fields", fields}}, false);
        !s)
      return fail(s.message());
    // FlexiCubes over the candidate cubes (first sample), then PLY + GLB.
    int resolution = int(meta_.value("slat_resolution", 64)) * 4;
    auto start = std::chrono::steady_clock::now();
    auto extracted = mesh::extractFlexiCubes(cubes, fields, resolution);
    if (!extracted)
      return fail(extracted.message());
    double secs = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - start)
                      .count();
    std::cerr << "[3/3 decoders] FlexiCubes at " << resolution << "^3: "
              << extracted->vertices.dim(0) << " vertices, "
              << extracted->faces.dim(0) << " faces in " << secs << " s"
              << (ranges.size() > 1 ? " (first sample only)" : "") << "\n";
    if (extracted->success()) {
      auto mesh = output::meshFromExtractResult(
          extracted->vertices, extracted->faces, extracted->vertexAttrs);
      if (!mesh)
        return fail(mesh.message());
      if (auto report = output::analyzeMesh(*mesh))
        std::cerr << "  mesh: " << output::formatMeshReport(*report) << "\n";
      Status s =
          output::writeMeshPly((fs::path(o_.out) / "mesh.ply").string(), *mesh);
      if (s) {
        auto glb = output::writeMeshGlb(
            (fs::path(o_.out) / "mesh.glb").string(), *mesh, {});
        if (!glb)
          s = Error{glb.message()};
      }
      if (!s)
        return fail(s.message());
    } else {
      std::cerr << "  mesh: no surface (mesh.ply/mesh.glb not written)\n";
    }
  }
  std::cerr << "outputs written to " << o_.out << "\n";
  return 0;
}

int inspect(const Bundle &bundle, const Program &program, const json &meta,
            const std::string &source) {
  std::cout << "bundle: " << source << "\n"
            << "format version: " << kBundleFormatVersion << "\n"
            << "meta: " << meta.dump() << "\n"
            << "sections:\n";
  for (const BundleSection &s : bundle.sections())
    std::cout << "  " << s.name << ": " << s.data.size() << " bytes, crc32 "
              << std::hex << crc32Of(s.data) << std::dec << "\n";
  std::cout << "entries:";
  for (const std::string &e : program.entries())
    std::cout << " " << e;
  std::cout << "\nfunctions:\n";
  for (const Function &f : program.functions()) {
    std::cout << "  " << f.name << "(";
    for (size_t i = 0; i < f.argTypes.size(); ++i)
      std::cout << (i ? ", " : "") << f.argTypes[i].str();
    std::cout << "): " << f.body.size() << " ops\n";
  }
  std::cout << "locations: " << program.locations().size() << "\n";
  if (const std::string *w = bundle.find("weights"))
    std::cout << "weights: " << *w << "\n";
  return 0;
}

} // namespace

int runtimeMain(int argc, char **argv) {
  auto opts = parseArgs(argc, argv);
  if (!opts)
    return std::cerr << "trellis.exe: error: " << opts.message() << "\n", 2;
  if (opts->help) {
    std::cout << kUsage;
    return 0;
  }
  std::string source = opts->bundle.empty() ? "/proc/self/exe" : opts->bundle;
  auto bundle = opts->bundle.empty() ? Bundle::readEmbedded("/proc/self/exe")
                                     : Bundle::readFile(opts->bundle);
  if (!bundle)
    return fail(bundle.message());
  const std::string *program = bundle->find("program");
  const std::string *locations = bundle->find("locations");
  if (!program || !locations)
    return fail("the bundle lacks its program or location table");
  auto prog = Program::parse(*program, *locations, source);
  if (!prog)
    return fail(prog.message());
  json meta = json::parse(bundle->find("meta") ? *bundle->find("meta") : "{}",
                          nullptr, false);
  json weights = json::parse(
      bundle->find("weights") ? *bundle->find("weights") : "{}", nullptr, false);
  if (meta.is_discarded() || weights.is_discarded())
    return fail("the bundle's meta or weights section is not JSON");
  if (opts->inspect)
    return inspect(*bundle, *prog, meta, source);
  if (opts->model.empty() || opts->cond.empty() || opts->out.empty()) {
    std::cerr << kUsage;
    return fail("--model, --cond and --out are required");
  }
  if (opts->threads > 0)
    ref::setNumThreads(opts->threads);
  std::cerr << "trellis.exe: no GPU backend in this build yet: running on the "
               "CPU reference backend ("
            << ref::numThreads() << " threads)\n";
  Runner runner(*opts, *prog, meta, weights);
  return runner.run();
}

} // namespace trellis
