//===- App.cpp - The trellis.exe command line -----------------------------===//
//
// Parses the command line, loads the bundle (embedded, or --bundle), creates
// one Engine (Engine.h) and runs every generation the command line lists
// (GenerationList.h) through it, printing progress on stderr and one line per
// generation. A generation that fails (a bad input file, say) is reported and
// the others still run; the exit status is 1 if any failed.
//
//===----------------------------------------------------------------------===//
#include "trellis/Runtime/App.h"

#include "trellis/Format/Npy.h"
#include "trellis/Image/Image.h"
#include "trellis/Image/Preprocess.h"
#include "trellis/Reference/Parallel.h"
#include "trellis/Runtime/Bundle.h"
#include "trellis/Runtime/Engine.h"
#include "trellis/Runtime/Fp8Calibration.h"
#include "trellis/Runtime/GpuExecutor.h"
#include "trellis/Runtime/MemoryBudget.h"
#include "trellis/Support/AtomicFile.h"

#include "runtime/app/BatchOutput.h"
#include "runtime/app/Generation.h"
#include "runtime/app/GenerationList.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <unistd.h>

namespace trellis {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char *const kUsage =
    R"(trellis.exe: the TRELLIS image-to-3D pipeline, compiled by trellisc

usage: trellis.exe --model DIR --image FILE [--image FILE ...] --out DIR [options]
       trellis.exe --model DIR --cond FILE [--cond FILE ...] --out DIR [options]
       trellis.exe --model DIR --inputs MANIFEST.jsonl --out DIR [--shard I/N]
       trellis.exe --summarize DIR
       trellis.exe --inspect

One process sets the model up once (weights staged, GPU code loaded) and runs
every generation through it; each prints one line with its wall time, GPU
time and voxel count.

  --model DIR          TRELLIS model directory (its ckpts/*.safetensors are
                       mapped, never copied whole)
  --image FILE         an RGBA image (PNG or JPEG) whose alpha marks the
                       object, preprocessed as TRELLIS does and encoded by
                       the compiled image-conditioning model; several
                       --image: one generation conditioned on them all
                       (a program compiled with --images N and
                       --multi-image); docs/guide/images.md
  --no-background-removal
                       accept an image without a usable alpha channel as it
                       is (TRELLIS would cut the background out with rembg,
                       which we do not ship): the whole image is the object
  --save-cond          also write cond_tokens.npy (the conditioning tokens)
                       and, with --image, cond_image.npy (the preprocessed
                       518 x 518 uint8 RGB images)
  --cond FILE          conditioning tokens, .npy or .npz (first array),
                       f32 [images, Lc, Cc] (post-LayerNorm DINOv2 tokens).
                       Repeat it for several generations: outputs go to
                       OUT/0, OUT/1, ... (one --cond: OUT itself)
  --inputs FILE        a manifest, one JSON object a line:
                       {"id": "chair", "cond": "chair.npy", "seed": 7}
                       or {"id": "chair", "image": "chair.png", "seed": 7}
                       ("image": a list for a multi-image generation;
                       optional "coords": FILE, "ss" / "slat": {"steps": N,
                       "cfg": W}, "formats": ["gs", "rf", "mesh"]);
                       relative paths are relative to the manifest. A batch:
                       each job's folder OUT/<id> appears whole, with
                       done.json (its record), or with failed.json (a bad
                       line or input: the others go on); a rerun skips the
                       jobs that have either (docs/guide/scale-out.md)
  --shard I/N          take the manifest lines whose index is I mod N
                       (default: Slurm's SLURM_ARRAY_TASK_ID / _COUNT when
                       set, else all)
  --retry-failed       run the jobs with a failed.json again
  --summarize DIR      print the table of a batch's records (jobs done,
                       failed with their messages, time percentiles,
                       GPU-hours) and exit: 1 if a job failed
  --repeat N           run each generation N times (benchmarking; the
                       files are rewritten)
  --calibrate N        a program compiled with --precision=fp8 (dynamic
                       scales): run stages 1-2 N times per input (seeds
                       --seed, --seed+1, ...) and write OUT/fp8_scales.json,
                       each FP8 linear's largest input |x|; nothing else is
                       written. trellisc --fp8-scales compiles it in as
                       static scales (docs/fp8.md)
  --neg-cond FILE      unconditional tokens (text pipelines: CLIP(""))
  --out DIR            output directory (created); output files of an earlier
                       run there (the names below) are removed first, and
                       temporary files of writers that died; a generation
                       that fails removes the files it wrote (those of its
                       finished stages too); other files stay
  --seed N             noise seed, 0..2^64-1 (default 42)
  --ss-noise FILE      sparse-structure noise [B,8,R,R,R] f32 instead of the seed
  --slat-noise FILE    structured-latent noise [N,8] f32 instead of the seed
  --coords FILE        int32 [N,4] coordinates: skip stage 1 (variants of a shape)
  --bench-stage1       with --coords (or a manifest's "coords"): run stage 1
                       anyway, then continue with the given voxels instead of
                       its own (benchmarks: a whole generation's cost on a
                       chosen voxel set)
  --formats LIST       decoders to run: gs,rf,mesh (default all)
  --mesh-cpu           FlexiCubes on the CPU reference even when the mesh
                       decoder ran on the GPU (for comparisons)
  --steps-ss N --cfg-ss W --steps-slat N --cfg-slat W
                       override the compiled sampler steps (1..10000) / CFG
                       strength (finite, >= 0)
  --threads N          CPU threads, 1..4096 (default: all)
  --check-finite       stop at the first op producing NaN/Inf, naming it
  --gpu MODE           auto (default: the GPU when one is usable, else the
                       CPU reference with a notice), off, or require
  --gpu-check-ops      compare every GPU op with the CPU reference on the
                       same inputs; stop at the first one off by more than
                       --gpu-check-tolerance (default 0.02 relative L2),
                       or at the first operand that no longer holds what
                       its producer wrote
  --gpu-sync-ops       wait for every GPU op, so a GPU fault names its op
  --gpu-no-gemm-tuning take cuBLASLt's first heuristic choice per GEMM
                       instead of timing its split-K-free candidates at the
                       first run (the default; same bits either way)
  --gpu-tuning-cache FILE|none
                       keep the timed GEMM picks in FILE across runs, per
                       GPU and cuBLASLt version (default
                       $TRELLIS_CACHE_DIR/gemm-tuning.json, else
                       $XDG_CACHE_HOME/trellis/..., else
                       ~/.cache/trellis/...); none: time them in every
                       process
  --no-cuda-graphs     launch sampler steps op by op instead of as graphs
  --stop-after STAGE   ss (after coords.npy) or slat (after slat.npy); only
                       the checkpoints of the stages run are needed
  --low-memory         release a stage's device weights and arena after it
  --memory-budget SIZE the most device memory the run may allocate (6G,
                       4096M, ...; the CUDA context comes on top; default:
                       what the GPU has free). Before any work the engine
                       plans every stage's memory and takes the fastest form
                       that fits (default, sequential-branches, low-memory),
                       or stops with the stage and bytes that do not fit
  --max-voxels N       the voxel count that plan assumes for the sparse stages
                       (default 32768); a generation with more is planned
                       again, for its count, before its stage 2
  --gpu-arch ARCH      native (default: the kernels made for this GPU) or
                       portable: the code an sm_75 (RTX 20xx) card runs, on
                       any GPU through the driver's JIT (testing the
                       consumer-card path)
  --gpu-device N       the CUDA device to run on (default 0)
  --debug-outputs      also write mesh_fields.npz (the mesh decoder's raw
                       fields) and print the mesh report
  --bundle FILE        run this bundle (for the bare trellis-runtime)
  --inspect            print the bundle (format, sections, functions, weights),
                       the device memory plan of its GPU stages (of the
                       sparse ones for the voxels of --coords) and of the
                       whole pipeline in each memory form (for --coords or
                       --max-voxels voxels); with --memory-budget the form a
                       run would take, or the error (exit 1) if none fits

SIGINT, SIGTERM and SIGHUP end the run with 130, 143 and 129, removing the
temporary file of any output being written.

outputs: ss_latent.npy coords.npy slat.npy gaussians.ply gaussians.npz
         radiance_field.npz mesh.ply mesh.glb (per-sample files get a _<b>
         suffix when the program was compiled with --batch > 1); each file
         appears whole or not at all
)";

struct Options {
  std::string model, negCond, out, ssNoise, slatNoise, coords, bundle;
  std::vector<std::string> conds;
  std::vector<std::string> images; // --image (one generation of them all)
  bool noBackgroundRemoval = false, saveCond = false;
  std::string inputs; // --inputs manifest
  std::string shard;  // --shard I/N
  bool retryFailed = false;
  std::string summarize; // --summarize DIR
  int64_t repeat = 1;
  int64_t calibrate = 0; // --calibrate N
  bool debugOutputs = false;
  bool benchStage1 = false;
  uint64_t seed = 42;
  bool gs = true, rf = true, mesh = true;
  SamplerRunOverrides ss, slat;
  int threads = 0;
  bool checkFinite = false, inspect = false, help = false;
  bool meshCpu = false;
  GpuRunOptions gpu;
  int64_t memoryPlanVoxels = 32768; // --max-voxels
  int lastStage = 3;
};

/// The command line, one option at a time: its name and typed values.
class ArgReader {
public:
  ArgReader(int argc, char **argv) : argc_(argc), argv_(argv) {}
  /// Moves to the next option; false at the end.
  bool next() {
    if (++i_ >= argc_)
      return false;
    name_ = argv_[i_];
    return true;
  }
  const std::string &name() const { return name_; }
  Result<std::string> value() {
    if (i_ + 1 >= argc_)
      return Error{"option " + name_ + " needs a value"};
    return std::string(argv_[++i_]);
  }
  Status str(std::string &dst) {
    auto v = value();
    if (!v)
      return v.status();
    dst = *v;
    return Status::ok();
  }
  /// A whole number in [lo, hi]: digits with an optional sign, no fraction
  /// or exponent (2.5 is refused, not truncated); the error names the option,
  /// the range and the value.
  Status integer(int64_t &dst, int64_t lo, int64_t hi) {
    auto v = value();
    if (!v)
      return v.status();
    int64_t n = 0;
    const char *end = v->data() + v->size();
    auto [ptr, ec] =
        std::from_chars(v->data() + (v->starts_with('+') ? 1 : 0), end, n);
    if (v->empty() || ec != std::errc() || ptr != end || n < lo || n > hi)
      return Error{"option " + name_ + " expects a whole number in " +
                   std::to_string(lo) + ".." + std::to_string(hi) +
                   ", found '" + *v + "'"};
    dst = n;
    return Status::ok();
  }
  /// An unsigned 64-bit whole number (a seed: every value distinct).
  Status unsigned64(uint64_t &dst) {
    auto v = value();
    if (!v)
      return v.status();
    uint64_t n = 0;
    const char *end = v->data() + v->size();
    auto [ptr, ec] = std::from_chars(v->data(), end, n);
    if (v->empty() || ec != std::errc() || ptr != end)
      return Error{"option " + name_ +
                   " expects a whole number in 0..18446744073709551615, "
                   "found '" +
                   *v + "'"};
    dst = n;
    return Status::ok();
  }
  /// A finite real number in [lo, hi] (hi = INFINITY: no upper bound).
  Status real(double &dst, double lo, double hi) {
    auto v = value();
    if (!v)
      return v.status();
    double d = 0;
    const char *end = v->data() + v->size();
    auto [ptr, ec] = std::from_chars(v->data(), end, d);
    if (v->empty() || ec != std::errc() || ptr != end || !std::isfinite(d) ||
        d < lo || d > hi) {
      std::ostringstream range;
      if (std::isinf(hi))
        range << "a finite number >= " << lo;
      else
        range << "a number in " << lo << ".." << hi;
      return Error{"option " + name_ + " expects " + range.str() + ", found '" +
                   *v + "'"};
    }
    dst = d;
    return Status::ok();
  }

private:
  int argc_;
  char **argv_;
  int i_ = 0;
  std::string name_;
};

/// The GPU options (--gpu, --gpu-*, --no-cuda-graphs, --low-memory); nullopt
/// when `r.name()` is not one of them.
std::optional<Status> parseGpuArg(ArgReader &r, Options &o) {
  const std::string &a = r.name();
  GpuOptions &g = o.gpu.options;
  if (a == "--gpu-check-ops")
    g.checkOps = true;
  else if (a == "--gpu-check-tolerance")
    return r.real(g.checkTolerance, 0, 1e3);
  else if (a == "--gpu-no-gemm-tuning")
    g.tuneGemms = false;
  else if (a == "--gpu-tuning-cache") {
    Status s = r.str(g.gemmTuningCache);
    if (s && g.gemmTuningCache == "none")
      g.gemmTuningCache.clear();
    return s;
  } else if (a == "--gpu-sync-ops")
    g.syncEachOp = true;
  else if (a == "--no-cuda-graphs")
    g.cudaGraphs = false;
  else if (a == "--low-memory")
    g.lowMemory = true;
  else if (a == "--memory-budget") {
    std::string text;
    Status s = r.str(text);
    if (!s)
      return s;
    auto bytes = parseByteSize(text);
    if (!bytes)
      return Status{Error{"option --memory-budget: " + bytes.message()}};
    g.memoryBudget = *bytes;
  } else if (a == "--max-voxels")
    return r.integer(o.memoryPlanVoxels, 1, int64_t(1) << 24);
  else if (a == "--gpu-arch") {
    std::string arch;
    Status s = r.str(arch);
    if (s && (arch == "native" || arch == "portable"))
      g.portable = arch == "portable";
    else if (s)
      s = Error{"option --gpu-arch expects native or portable, found '" + arch +
                "'"};
    return s;
  } else if (a == "--gpu-device") {
    int64_t device = 0;
    Status s = r.integer(device, 0, 1023);
    g.device = int(device);
    return s;
  } else if (a == "--gpu") {
    std::string mode;
    Status s = r.str(mode);
    if (s && mode == "auto")
      o.gpu.mode = GpuMode::Auto;
    else if (s && mode == "off")
      o.gpu.mode = GpuMode::Off;
    else if (s && mode == "require")
      o.gpu.mode = GpuMode::Require;
    else if (s)
      s = Error{"option --gpu expects auto, off or require, found '" + mode +
                "'"};
    return s;
  } else
    return std::nullopt;
  return Status::ok();
}

/// The sampler options (--steps-*, --cfg-*); nullopt for others.
std::optional<Status> parseSamplerArg(ArgReader &r, Options &o) {
  const std::string &a = r.name();
  // The ranges pipeline.json allows (lib/Config/PipelineConfig.cpp).
  if (a == "--steps-ss" || a == "--steps-slat") {
    int64_t n = 0;
    Status s = r.integer(n, 1, 10000);
    (a == "--steps-ss" ? o.ss : o.slat).steps = n;
    return s;
  }
  if (a == "--cfg-ss" || a == "--cfg-slat") {
    double w = 0;
    Status s = r.real(w, 0, INFINITY);
    (a == "--cfg-ss" ? o.ss : o.slat).cfgStrength = w;
    return s;
  }
  return std::nullopt;
}

Status parseFormats(ArgReader &r, Options &o) {
  std::string list;
  Status s = r.str(list);
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
  return s;
}

Status parseStopAfter(ArgReader &r, Options &o) {
  std::string stage;
  Status s = r.str(stage);
  if (s && stage == "ss")
    o.lastStage = 1;
  else if (s && stage == "slat")
    o.lastStage = 2;
  else if (s)
    s = Error{"option --stop-after expects ss or slat, found '" + stage + "'"};
  return s;
}

Result<Options> parseArgs(int argc, char **argv) {
  Options o;
  o.gpu.options.gemmTuningCache = defaultGemmTuningCache();
  ArgReader r(argc, argv);
  // Options that are a path (or a list of paths).
  const std::map<std::string, std::string *> paths = {
      {"--model", &o.model},
      {"--neg-cond", &o.negCond},
      {"--out", &o.out},
      {"--ss-noise", &o.ssNoise},
      {"--slat-noise", &o.slatNoise},
      {"--coords", &o.coords},
      {"--bundle", &o.bundle},
      {"--inputs", &o.inputs},
      {"--shard", &o.shard},
      {"--summarize", &o.summarize}};
  while (r.next()) {
    const std::string &a = r.name();
    Status s = Status::ok();
    if (auto gpu = parseGpuArg(r, o))
      s = *gpu;
    else if (auto sampler = parseSamplerArg(r, o))
      s = *sampler;
    else if (auto it = paths.find(a); it != paths.end())
      s = r.str(*it->second);
    else if (a == "--help" || a == "-h")
      o.help = true;
    else if (a == "--inspect")
      o.inspect = true;
    else if (a == "--check-finite")
      o.checkFinite = true;
    else if (a == "--mesh-cpu")
      o.meshCpu = true;
    else if (a == "--retry-failed")
      o.retryFailed = true;
    else if (a == "--debug-outputs")
      o.debugOutputs = true;
    else if (a == "--bench-stage1")
      o.benchStage1 = true;
    else if (a == "--repeat")
      s = r.integer(o.repeat, 1, 1000000);
    else if (a == "--calibrate")
      s = r.integer(o.calibrate, 1, 100000);
    else if (a == "--stop-after")
      s = parseStopAfter(r, o);
    else if (a == "--cond") {
      std::string c;
      s = r.str(c);
      o.conds.push_back(c);
    } else if (a == "--image") {
      std::string c;
      s = r.str(c);
      o.images.push_back(c);
    } else if (a == "--no-background-removal")
      o.noBackgroundRemoval = true;
    else if (a == "--save-cond")
      o.saveCond = true;
    else if (a == "--seed")
      s = r.unsigned64(o.seed);
    else if (a == "--threads") {
      int64_t n = 0;
      s = r.integer(n, 1, 4096);
      o.threads = int(n);
    } else if (a == "--formats")
      s = parseFormats(r, o);
    else
      s = Error{"unknown option '" + a + "' (see --help)"};
    if (!s)
      return Error{s.message()};
  }
  return o;
}

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

int fail(const std::string &message) {
  std::cerr << "trellis.exe: error: " << message << "\n";
  return 1;
}

/// A usage error (options that do not fit together): exit status 2.
int usageFail(const std::string &message) {
  std::cerr << "trellis.exe: error: " << message << "\n";
  return 2;
}

/// Progress on stderr, as trellis.exe always printed it.
class StderrObserver : public PipelineObserver {
public:
  void step(const std::string &fn, int64_t k, int64_t n) override {
    std::cerr << "\r  " << fn << ": step " << k << "/" << n
              << (k == n ? "\n" : "") << std::flush;
  }
  void message(const std::string &line) override { std::cerr << line << "\n"; }
};

/// Reads one generation's input files into a request.
/// Fails when input file `path` (given as `what`) is one that this
/// generation's outputs in `outDir` would replace (the same file by device
/// and inode, links followed).
Status checkNotAnOutput(const std::string &path, const std::string &what,
                        const std::string &outDir) {
  if (path.empty() || outDir.empty())
    return Status::ok();
  const fs::path p(path);
  if (!isGenerationOutputName(p.filename().string()))
    return Status::ok();
  std::error_code ec;
  fs::path candidate = fs::path(outDir) / p.filename();
  if (fs::exists(candidate, ec) && fs::equivalent(candidate, p, ec))
    return Error{what + " '" + path + "' is in --out '" + outDir +
                 "', where this run writes " + p.filename().string() +
                 ": move it or choose another --out"};
  return Status::ok();
}

/// The images of one generation, preprocessed as TRELLIS does
/// (trellis/Image/Preprocess.h) and normalized: f32 [N, 3, 518, 518].
Result<NamedTensor> readImages(const std::vector<std::string> &paths,
                               const Options &o, GenerationRequest &req,
                               const GenerationSpec &g) {
  std::vector<RgbaImage> images;
  for (const std::string &path : paths) {
    TRELLIS_RETURN_IF_ERROR(checkNotAnOutput(path, "--image", g.outDir));
    TRELLIS_ASSIGN_OR_RETURN(RgbaImage image, readImageFile(path));
    images.push_back(std::move(image));
  }
  PreprocessOptions options;
  options.noBackgroundRemoval = o.noBackgroundRemoval;
  TRELLIS_ASSIGN_OR_RETURN(ConditioningImages prepared,
                           prepareConditioningImages(images, paths, options));
  req.condImages = std::move(prepared.rgb); // for --save-cond
  std::string what = "--image " + paths.front();
  if (paths.size() > 1)
    what += " (and " + std::to_string(paths.size() - 1) + " more)";
  return NamedTensor{std::move(prepared.normalized), what};
}

Result<GenerationRequest> makeRequest(const Options &o,
                                      const GenerationSpec &g) {
  for (auto [path, what] : {std::pair{g.cond, "--cond"},
                            {g.coords, "--coords"},
                            {o.ssNoise, "--ss-noise"},
                            {o.slatNoise, "--slat-noise"},
                            {o.negCond, "--neg-cond"}})
    TRELLIS_RETURN_IF_ERROR(checkNotAnOutput(path, what, g.outDir));
  GenerationRequest req;
  if (!g.images.empty()) {
    TRELLIS_ASSIGN_OR_RETURN(req.images, readImages(g.images, o, req, g));
  } else {
    // Named by the option, or by the manifest line ("m.jsonl:3: cond").
    const bool fromManifest = !g.origin.starts_with("--");
    const std::string what = fromManifest ? g.origin + ": cond" : "--cond";
    auto cond = readArray(g.cond, what.c_str());
    if (!cond)
      return Error{cond.message()};
    req.cond = {*cond, what + " " + g.cond};
  }
  req.saveCond = o.saveCond;
  auto optional = [](const std::string &path, const char *what,
                     std::optional<NamedTensor> &dst) -> Status {
    if (path.empty())
      return Status::ok();
    auto t = readArray(path, what);
    if (!t)
      return Error{t.message()};
    std::string name = what;
    if (name == "--coords")
      name += " " + path;
    dst = NamedTensor{*t, name};
    return Status::ok();
  };
  TRELLIS_RETURN_IF_ERROR(optional(o.negCond, "--neg-cond", req.negCond));
  TRELLIS_RETURN_IF_ERROR(optional(g.coords, "--coords", req.coords));
  if (!req.coords || o.benchStage1)
    TRELLIS_RETURN_IF_ERROR(optional(o.ssNoise, "--ss-noise", req.ssNoise));
  TRELLIS_RETURN_IF_ERROR(optional(o.slatNoise, "--slat-noise", req.slatNoise));
  req.seed = g.seed;
  req.gs = o.gs;
  req.rf = o.rf;
  req.mesh = o.mesh;
  req.meshOnCpu = o.meshCpu;
  // A manifest entry's sampler settings over the command line's.
  req.ss = o.ss;
  req.slat = o.slat;
  for (auto [entry, dst] : {std::pair{&g.ss, &req.ss}, {&g.slat, &req.slat}})
    if (*entry) {
      if ((*entry)->steps)
        dst->steps = (*entry)->steps;
      if ((*entry)->cfgStrength)
        dst->cfgStrength = (*entry)->cfgStrength;
    }
  if (g.formats) {
    auto has = [&](const char *f) {
      return std::find(g.formats->begin(), g.formats->end(), f) !=
             g.formats->end();
    };
    req.gs = has("gs");
    req.rf = has("rf");
    req.mesh = has("mesh");
  }
  req.lastStage = o.lastStage;
  req.outDir = g.outDir;
  req.debugOutputs = o.debugOutputs;
  req.stage1WithCoords = o.benchStage1;
  req.keepMeshFields = false; // written only as a debug output
  return req;
}

int inspect(const Bundle &bundle, const Program &program, const json &meta,
            const std::string &source, const Options &opts) {
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
  if (Fp8ProgramKind fp8 = fp8ProgramKind(program); fp8.fp8)
    std::cout << "fp8: " << Fp8Calibration(program).keys()
              << " FP8 linears (W8A8 E4M3), " << fp8.attentionOps
              << " FP8 self-attention ops, "
              << (fp8.staticScales ? "static activation scales (trellisc "
                                     "--fp8-scales)"
                                   : "dynamic activation scales "
                                     "(--calibrate N measures static ones)")
              << "\n";
  if (const std::string *w = bundle.find("weights"))
    std::cout << "weights: " << *w << "\n";
  // The device memory of the GPU stages, planned here (no GPU needed).
  std::vector<std::string> gpuEntries;
  if (meta.contains("gpu_entries") && meta["gpu_entries"].is_array())
    for (const auto &e : meta["gpu_entries"])
      if (e.is_string())
        gpuEntries.push_back(e.get<std::string>());
  std::optional<HostTensor> coords;
  if (!opts.coords.empty()) {
    auto read = readNpy(opts.coords);
    if (!read)
      return fail(read.message());
    coords = *read;
  }
  for (const std::string &name : gpuEntries) {
    const Function *fn = program.find(name);
    bool dynamic = false;
    for (const ValueType &t : fn ? fn->argTypes : std::vector<ValueType>{})
      for (int64_t d : t.shape)
        dynamic |= d < 0;
    std::vector<RtValue> args;
    if (dynamic && coords)
      args = planArguments(*fn, *coords);
    auto plan = GpuExecutor::planMemory(program, name, {},
                                        args.empty() ? nullptr : &args);
    if (!plan) {
      std::cout << "gpu plan of " << name << ": " << plan.message() << "\n";
      continue;
    }
    auto mib = [](size_t b) { return std::to_string((b + (1 << 19)) >> 20); };
    std::cout << "gpu plan of " << name << ": arena " << mib(plan->arenaBytes)
              << " MiB for " << plan->values << " values ("
              << mib(plan->naiveBytes) << " MiB without reuse; " << plan->views
              << " views), weights " << mib(plan->weightBytes)
              << " MiB, constants " << mib(plan->constantBytes)
              << " MiB; checked: no two live values share memory\n";
  }
  if (gpuEntries.empty())
    return 0;
  // The whole pipeline in each memory form, and the form a run would take
  // under --memory-budget (MemoryBudget.h).
  PipelineMemoryRequest request;
  request.functions = gpuEntries;
  request.flexiCubes = std::find(gpuEntries.begin(), gpuEntries.end(),
                                 "decode_mesh") != gpuEntries.end();
  request.voxels = opts.memoryPlanVoxels;
  request.resolution = meta.value("slat_resolution", 64);
  request.coords = coords;
  request.options = opts.gpu.options;
  auto plans = planPipelineMemory(program, request);
  if (!plans)
    return fail(plans.message());
  const size_t budget = opts.gpu.options.memoryBudget;
  std::cout << describeMemoryPlans(*plans, budget);
  if (!budget)
    return 0;
  std::vector<PipelineMemoryPlan> candidates = *plans;
  if (opts.gpu.options.lowMemory)
    candidates.erase(candidates.begin(), candidates.end() - 1);
  auto chosen = chooseMemoryForm(candidates, budget);
  if (!chosen)
    return fail(chosen.message());
  std::cout << "memory budget " << formatMiB(budget) << ": the " << chosen->form
            << " form (peak " << formatMiB(chosen->peak) << ")\n";
  return 0;
}

/// A manifest batch's bookkeeping (BatchOutput.h): the shard, the program's
/// identity for the records, counts for the closing line.
struct Batch {
  Shard shard;
  std::string programCrc32;
  int skippedDone = 0, skippedFailed = 0;
};

/// The record of a job that ran (done.json).
json doneRecord(const GenerationSpec &g, const GenerationStats &st,
                const Engine &engine, const Batch &batch, double readSeconds,
                const std::string &started) {
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  json files = json::array();
  for (const std::string &f : st.files)
    files.push_back(fs::path(f).filename().string());
  return json{
      {"id", g.id},
      {"origin", g.origin},
      {"seed", g.seed},
      {"voxels", st.voxels},
      {"wall_seconds", st.wallSeconds},
      {"gpu_seconds", st.gpuSeconds},
      {"setup_seconds", st.setupSeconds},
      {"download_seconds", st.downloadSeconds},
      {"read_seconds", readSeconds},
      {"backend", engine.backend("ss_stage")},
      {"files", files},
      {"program_crc32", batch.programCrc32},
      {"versions",
       {{"trellis", TRELLIS_VERSION}, {"bundle_format", kBundleFormatVersion}}},
      {"shard", batch.shard.str()},
      {"host", host},
      {"pid", ::getpid()},
      {"started", started},
      {"finished", utcNow()}};
}

/// Records a job that could not run: OUT/<id>/failed.json, appearing whole.
Status recordFailure(const Options &opts, const GenerationSpec &g,
                     const Batch &batch, const std::string &error) {
  auto tmp = makeTemporary(opts.out, g.id);
  if (!tmp)
    return tmp.status();
  return commitJob(*tmp, g.outDir, "failed.json",
                   json{{"id", g.id},
                        {"origin", g.origin},
                        {"error", error},
                        {"shard", batch.shard.str()},
                        {"program_crc32", batch.programCrc32},
                        {"pid", ::getpid()},
                        {"finished", utcNow()}});
}

/// The engine's options for running `generations` as the command line says;
/// notices go to `observer`.
EngineOptions engineOptions(const Options &opts,
                            const std::vector<GenerationSpec> &generations,
                            StderrObserver &observer) {
  EngineOptions eo;
  eo.gpu = opts.gpu;
  eo.memoryPlanVoxels = opts.memoryPlanVoxels;
  eo.checkFinite = opts.checkFinite;
  eo.modelDir = opts.model;
  eo.lastStage = opts.lastStage; // --stop-after: the later models may be absent
  eo.images =
      std::any_of(generations.begin(), generations.end(),
                  [](const GenerationSpec &g) { return !g.images.empty(); });
  eo.notice = [&observer](const std::string &line) { observer.message(line); };
  return eo;
}

/// --calibrate N: stages 1-2 of every generation with N seeds each, on an
/// FP8 program with dynamic scales; writes OUT/fp8_scales.json.
int runCalibration(const LoadedBundle &loaded, const Options &opts,
                   const std::vector<GenerationSpec> &generations) {
  const Fp8ProgramKind kind = fp8ProgramKind(loaded.program);
  if (!kind.fp8)
    return usageFail("--calibrate measures the FP8 linears' activation "
                     "scales: this program has none (compile it with "
                     "trellisc --precision=fp8)");
  if (kind.staticScales)
    return usageFail("--calibrate needs the FP8 program with dynamic scales: "
                     "this one was compiled with --fp8-scales");
  Fp8Calibration calibration(loaded.program);
  StderrObserver observer;
  EngineOptions eo = engineOptions(opts, generations, observer);
  eo.lastStage = 2; // the decoders have no FP8 linear
  eo.fp8Observer = [&](const Instr &op, std::span<const float> amax) {
    calibration.observe(op, amax);
  };
  auto engine = Engine::create(loaded, std::move(eo));
  if (!engine)
    return fail(engine.message());
  json seeds = json::array(), inputs = json::array();
  const int64_t runs = int64_t(generations.size()) * opts.calibrate;
  int64_t run = 0;
  for (const GenerationSpec &g : generations) {
    inputs.push_back(g.origin);
    for (int64_t i = 0; i < opts.calibrate; ++i) {
      GenerationSpec seeded = g;
      seeded.seed = g.seed + uint64_t(i);
      seeded.outDir.clear(); // nothing but the scales is written
      auto request = makeRequest(opts, seeded);
      if (!request)
        return fail(g.origin + ": " + request.message());
      request->lastStage = 2;
      std::cerr << "== calibration run " << ++run << "/" << runs << " ("
                << g.origin << ", seed " << seeded.seed << ")\n";
      auto result = (*engine)->run(*request, &observer);
      if (!result)
        return fail("calibration run " + std::to_string(run) + ": " +
                    result.message());
      seeds.push_back(seeded.seed);
    }
  }
  auto scales =
      calibration.toJson({{"runs", runs},
                          {"inputs", inputs},
                          {"seeds", seeds},
                          {"stages", "ss_stage, slat_stage"},
                          {"backend", (*engine)->backend("ss_stage")}});
  if (!scales)
    return fail(scales.message());
  std::error_code ec;
  fs::create_directories(opts.out, ec);
  const std::string path = (fs::path(opts.out) / "fp8_scales.json").string();
  AtomicFile file(path);
  if (!file.status())
    return fail(path + ": " + file.status().message());
  file.write(scales->dump(2) + "\n");
  if (Status s = file.commit(); !s)
    return fail(path + ": " + s.message());
  std::cerr << "calibration: " << calibration.keys() << " FP8 linears, "
            << calibration.attentionKeys() << " FP8 attention ops over " << runs
            << " run" << (runs == 1 ? "" : "s") << " -> " << path
            << " (trellisc --precision=fp8 --fp8-scales " << path << ")\n";
  return 0;
}

/// Creates the engine and runs every generation (each opts.repeat times).
/// Files of generation g are written while g+1 computes; a write error is
/// reported as g's. With a manifest (`batch`), each job's folder appears
/// whole with its record, jobs recorded earlier are skipped, and a failed job
/// is recorded and does not stop the others.
int runGenerations(const LoadedBundle &loaded, const Options &opts,
                   const std::vector<GenerationSpec> &generations,
                   Batch *batch) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  StderrObserver observer;
  if (batch)
    if (Status s = removeStaleTemporaries(opts.out); !s)
      return fail(s.message());
  auto engine =
      Engine::create(loaded, engineOptions(opts, generations, observer));
  if (!engine)
    return fail(engine.message());
  const double setupSeconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  std::cerr << "engine ready in " << setupSeconds << " s\n";
  struct Pending {
    std::string label;
    GenerationStats stats;
    const GenerationSpec *spec;
    std::string tmp; ///< batch: the job's temporary folder
    json record;     ///< batch: its done.json
  };
  std::optional<Pending> pending; // the last generation's files
  int failed = 0, runs = 0;
  // A batch job that failed: recorded; a failure to record it ends the run.
  auto jobFailed = [&](const GenerationSpec &g, const std::string &label,
                       const std::string &error) {
    std::cerr << "trellis.exe: error: " << label << ": " << error << "\n";
    ++failed;
    if (!batch)
      return true;
    if (Status s = recordFailure(opts, g, *batch, error); !s) {
      std::cerr << "trellis.exe: error: " << label
                << ": recording the failure: " << s.message() << "\n";
      return false;
    }
    return true;
  };
  bool stop = false;
  auto settle = [&]() {
    if (!pending)
      return;
    Status s = (*engine)->finishWrites(pending->stats);
    if (s && batch)
      s = commitJob(pending->tmp, pending->spec->outDir, "done.json",
                    pending->record);
    if (!s) {
      if (batch) {
        std::error_code ec;
        fs::remove_all(pending->tmp, ec);
      }
      stop |= !jobFailed(*pending->spec, pending->label, s.message());
    }
    pending.reset();
  };
  const bool several = generations.size() > 1 || opts.repeat > 1;
  for (const GenerationSpec &g : generations) {
    if (stop)
      break;
    if (batch) {
      JobRecord record = recordOf(g.outDir);
      if (record == JobRecord::Done ||
          (record == JobRecord::Failed && !opts.retryFailed)) {
        ++(record == JobRecord::Done ? batch->skippedDone
                                     : batch->skippedFailed);
        continue;
      }
      if (!g.invalid.empty()) {
        ++runs;
        stop |= !jobFailed(g, "generation " + g.id, g.invalid);
        continue;
      }
    }
    for (int64_t rep = 0; rep < opts.repeat && !stop; ++rep) {
      ++runs;
      std::string label = "generation " + g.id;
      if (opts.repeat > 1)
        label += " (run " + std::to_string(rep + 1) + "/" +
                 std::to_string(opts.repeat) + ")";
      if (several)
        std::cerr << "== " << label << " (" << g.origin << ")\n";
      const std::string started = utcNow();
      const auto readStart = Clock::now();
      auto request = makeRequest(opts, g);
      // Reading the inputs: .npy files, or decoding and preprocessing images.
      const double readSeconds =
          std::chrono::duration<double>(Clock::now() - readStart).count();
      if (!request) {
        settle();
        stop |= !jobFailed(g, label, request.message());
        continue;
      }
      std::string tmp;
      if (batch) {
        auto made = makeTemporary(opts.out, g.id);
        if (!made) {
          settle();
          stop |= !jobFailed(g, label, made.message());
          continue;
        }
        tmp = *made;
        request->outDir = tmp;
      }
      request->asyncWrites = true;
      auto result = (*engine)->run(*request, &observer);
      settle(); // the previous generation's files, written meanwhile
      if (!result) {
        if (batch) {
          std::error_code ec;
          fs::remove_all(tmp, ec);
        }
        stop |= !jobFailed(g, label, result.message());
        continue;
      }
      const GenerationStats &st = (*engine)->lastStats();
      pending = Pending{label, st, &g, tmp, json()};
      if (batch)
        pending->record =
            doneRecord(g, st, **engine, *batch, readSeconds, started);
      std::ostringstream line;
      line << label << ": " << st.wallSeconds << " s wall, " << st.gpuSeconds
           << " s GPU, " << st.voxels << " voxels -> " << g.outDir
           << " (host: inputs read in " << readSeconds << " s, setup "
           << st.setupSeconds << " s, downloads " << st.downloadSeconds
           << " s)";
      std::cerr << line.str() << "\n";
    }
  }
  settle();
  const double total =
      std::chrono::duration<double>(Clock::now() - start).count();
  std::cerr << runs - failed << " of " << runs << " generation"
            << (runs == 1 ? "" : "s") << " written to " << opts.out << " in "
            << total << " s (engine setup " << setupSeconds
            << " s; files included)";
  if (batch)
    std::cerr << "; shard " << batch->shard.str() << ", skipped "
              << batch->skippedDone << " done earlier and "
              << batch->skippedFailed << " failed earlier";
  std::cerr << "\n";
  // A batch's shard is complete only when none of its jobs is failed, those
  // recorded by an earlier run included.
  return failed || stop || (batch && batch->skippedFailed) ? 1 : 0;
}

} // namespace

namespace {
int runtimeMainImpl(int argc, char **argv);
} // namespace

int runtimeMain(int argc, char **argv) {
  // Ctrl-C, kill, a closed terminal: no temporary file left behind.
  exitCleanlyOnSignals();
  // The tool boundary: whatever escapes (an allocation a hostile input
  // sized, a library's exception) ends the run with a message, not abort().
  try {
    return runtimeMainImpl(argc, argv);
  } catch (const std::bad_alloc &) {
    return fail("out of host memory (an input asked for more than this "
                "machine has)");
  } catch (const std::exception &e) {
    return fail(std::string("internal error: ") + e.what());
  }
}

namespace {
int runtimeMainImpl(int argc, char **argv) {
  auto opts = parseArgs(argc, argv);
  if (!opts)
    return std::cerr << "trellis.exe: error: " << opts.message() << "\n", 2;
  if (opts->help) {
    std::cout << kUsage;
    return 0;
  }
  if (!opts->summarize.empty())
    return summarizeBatch(opts->summarize, std::cout);
  std::string source = opts->bundle.empty() ? "/proc/self/exe" : opts->bundle;
  auto loaded = LoadedBundle::load(source, opts->bundle.empty());
  if (!loaded)
    return fail(loaded.message());
  if (opts->inspect)
    return inspect(loaded->bundle, loaded->program, loaded->meta, source,
                   *opts);
  if (opts->model.empty() ||
      (opts->conds.empty() && opts->images.empty() && opts->inputs.empty()) ||
      opts->out.empty()) {
    std::cerr << kUsage;
    return usageFail("--model, --image or --cond (or --inputs) and --out are "
                     "required");
  }
  if (!opts->conds.empty() + !opts->images.empty() + !opts->inputs.empty() > 1)
    return usageFail(
        "--image, --cond and --inputs exclude each other (--image: "
        "the images of one generation; --cond: one generation each; "
        "--inputs: every generation in the manifest)");
  if ((!opts->shard.empty() || opts->retryFailed) && opts->inputs.empty())
    return usageFail("--shard and --retry-failed apply to a manifest "
                     "(--inputs)");
  if (opts->benchStage1 && opts->coords.empty() && opts->inputs.empty())
    return fail("--bench-stage1 replaces stage 1's voxels by --coords (or a "
                "manifest's \"coords\"): give them");
  std::vector<GenerationSpec> generations;
  if (!opts->inputs.empty()) {
    if (!opts->coords.empty())
      return fail("--coords applies to --cond; give each manifest line its "
                  "own \"coords\"");
    auto read = readGenerationManifest(opts->inputs, opts->out);
    if (!read)
      return fail(read.message());
    generations = std::move(*read);
  } else if (!opts->images.empty()) {
    GenerationSpec g;
    g.id = "0";
    g.images = opts->images;
    g.coords = opts->coords;
    g.seed = opts->seed;
    g.outDir = opts->out;
    g.origin = "--image " + opts->images.front();
    generations.push_back(std::move(g));
  } else {
    generations =
        generationsFromConds(opts->conds, opts->coords, opts->seed, opts->out);
  }
  if (opts->threads > 0)
    ref::setNumThreads(opts->threads);
  {
    const nlohmann::json &gpu =
        loaded->meta.value("gpu_entries", nlohmann::json::array());
    std::cerr << "trellis.exe: compiled for "
              << loaded->meta.value("target", std::string("cpu"))
              << (gpu.empty() ? "" : " (GPU stages: " + gpu.dump() + ")")
              << "; CPU reference stages use " << ref::numThreads()
              << " threads\n";
  }
  if (opts->calibrate) {
    if (!opts->inputs.empty())
      return usageFail("--calibrate takes --cond or --image inputs");
    return runCalibration(*loaded, *opts, generations);
  }
  if (opts->inputs.empty())
    return runGenerations(*loaded, *opts, generations, nullptr);
  Batch batch;
  auto shard = shardOf(opts->shard);
  if (!shard)
    return usageFail(shard.message());
  batch.shard = *shard;
  batch.programCrc32 = fileCrc32(source);
  std::vector<GenerationSpec> mine;
  for (GenerationSpec &g : generations)
    if (int64_t(g.index) % batch.shard.count == batch.shard.index)
      mine.push_back(std::move(g));
  std::cerr << "trellis.exe: shard " << batch.shard.str() << ": " << mine.size()
            << " of " << generations.size() << " manifest entries\n";
  return runGenerations(*loaded, *opts, mine, &batch);
}

} // namespace

} // namespace trellis
