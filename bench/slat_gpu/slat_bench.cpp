//===- slat_bench.cpp - Times the compiled SLat stage and decoders --------===//
//
// trellis-slat-bench --exe trellis.exe --model DIR --coords coords.npy
//                    [--noise noise.npy] [--reps N] [--decoders] [--cpu]
//                    [--steps N --cfg W] [--profile] [--out DIR]
//                    [--plan-only] [--no-concurrent-branches] [--attention CFG]
//                    [--no-gemm-tuning]
//                    [--json FILE]
//
// Loads the bundle embedded in a trellis.exe, runs its slat_stage (the
// 25-step guided flow sampler over the voxels of coords.npy, int32 [N, 4] at
// 64³, and the de-normalization) on the model's cond.npy, once to warm up
// (weight staging, coordinate binding, graph capture) and then N times, and
// prints a table: GPU time per run (CUDA events around the stage), median,
// weights, arena, device memory. With --decoders, decode_gs / decode_rf /
// decode_mesh run on the stage's output the same way. --out writes the
// stage's and decoders' outputs as .npy (for bench/slat_gpu/parity.py);
// --cpu runs everything on the CPU reference instead (for GPU-vs-CPU parity
// at tiny size); --plan-only prints the device memory plan of each function
// for these voxels and stops (no GPU needed). Not a test: a benchmark.
//
//===----------------------------------------------------------------------===//
#include "trellis/Format/Npy.h"
#include "trellis/Runtime/GpuExecutor.h"
#include "trellis/Runtime/Runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

using namespace trellis;

namespace {

void fail(const std::string &m) {
  std::fprintf(stderr, "error: %s\n", m.c_str());
  std::exit(1);
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  std::string exe, model, coordsPath, noisePath, outDir, attention, jsonPath,
      softmax = "fixed";
  int reps = 3;
  bool decoders = false, cpu = false, profile = false, planOnly = false,
       concurrent = true, graphs = true, checkOps = false, syncOps = false,
       lowMemory = false, tuneGemms = true;
  std::optional<int64_t> steps;
  std::optional<double> cfg;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc)
        fail(a + " needs a value");
      return argv[++i];
    };
    if (a == "--exe")
      exe = next();
    else if (a == "--model")
      model = next();
    else if (a == "--coords")
      coordsPath = next();
    else if (a == "--noise")
      noisePath = next();
    else if (a == "--reps")
      reps = std::atoi(next().c_str());
    else if (a == "--decoders")
      decoders = true;
    else if (a == "--cpu")
      cpu = true;
    else if (a == "--low-memory")
      lowMemory = true;
    else if (a == "--check-ops")
      checkOps = true;
    else if (a == "--sync-ops")
      syncOps = true;
    else if (a == "--no-cuda-graphs")
      graphs = false;
    else if (a == "--no-concurrent-branches")
      concurrent = false;
    else if (a == "--attention")
      attention = next();
    else if (a == "--attention-softmax") {
      softmax = next();
      if (softmax != "fixed" && softmax != "online") {
        std::fprintf(stderr, "--attention-softmax: fixed or online, not %s\n",
                     softmax.c_str());
        return 2;
      }
    } else if (a == "--json")
      jsonPath = next();
    else if (a == "--plan-only")
      planOnly = true;
    else if (a == "--profile")
      profile = true;
    else if (a == "--no-gemm-tuning")
      tuneGemms = false;
    else if (a == "--steps")
      steps = std::atoll(next().c_str());
    else if (a == "--cfg")
      cfg = std::atof(next().c_str());
    else if (a == "--out")
      outDir = next();
    else {
      std::fprintf(
          stderr,
          "usage: %s --exe trellis.exe --model DIR --coords "
          "coords.npy [--noise noise.npy] [--reps N] [--decoders] "
          "[--cpu] [--steps N --cfg W] [--profile] [--out DIR]\n"
          "       [--plan-only] [--no-concurrent-branches] [--no-cuda-graphs] "
          "[--check-ops] [--sync-ops] [--low-memory] "
          "[--attention CONFIG] [--attention-softmax fixed|online]\n"
          "       [--no-gemm-tuning] [--json FILE]\n",
          argv[0]);
      return 2;
    }
  }
  if (exe.empty() || model.empty() || coordsPath.empty())
    fail("--exe, --model and --coords are required (see --help)");
  auto bundle = LoadedBundle::load(exe, /*embedded=*/true);
  if (!bundle)
    fail(bundle.message());
  auto cond = readNpy(model + "/cond.npy");
  if (!cond)
    fail(cond.message());
  auto coords = readNpy(coordsPath);
  if (!coords)
    fail(coords.message());
  if (coords->dtype() != DType::I32 || coords->rank() != 2 ||
      coords->dim(1) != 4)
    fail(coordsPath + ": expected int32 [N, 4] (b, x, y, z), found " +
         shapeToString(coords->shape()));
  const int64_t n = coords->dim(0);
  HostTensor noise(DType::F32, {n, 8});
  if (!noisePath.empty()) {
    auto t = readNpy(noisePath);
    if (!t)
      fail(t.message());
    noise = *t;
  } else {
    std::mt19937 gen(1);
    std::normal_distribution<float> normal;
    for (int64_t i = 0; i < noise.numel(); ++i)
      noise.mutableData<float>()[i] = normal(gen);
  }

  if (planOnly) {
    for (const char *fn :
         {"slat_stage", "decode_gs", "decode_rf", "decode_mesh"}) {
      std::vector<RtValue> args = {*coords};
      if (std::string(fn) == "slat_stage")
        args.push_back(*cond);
      args.push_back(noise);
      auto plan = GpuExecutor::planMemory(bundle->program, fn, {}, &args);
      if (!plan)
        fail(std::string(fn) + ": " + plan.message());
      std::printf("%s: arena %.1f MiB for %zu values (%.1f MiB without "
                  "reuse, %zu views), weights %.1f MiB\n",
                  fn, plan->arenaBytes / 1048576.0, plan->values,
                  plan->naiveBytes / 1048576.0, plan->views,
                  plan->weightBytes / 1048576.0);
    }
    return 0;
  }
  SessionOptions options;
  options.gpu.mode = cpu ? GpuMode::Off : GpuMode::Require;
  options.gpu.options.profile = profile;
  options.gpu.options.concurrentBranches = concurrent;
  options.gpu.options.cudaGraphs = graphs;
  options.gpu.options.checkOps = checkOps;
  options.gpu.options.lowMemory = lowMemory;
  options.gpu.options.syncEachOp = syncOps;
  options.gpu.options.attentionConfig = attention;
  options.gpu.options.attentionSoftmax = softmax;
  options.gpu.options.tuneGemms = tuneGemms;
  options.gpuCode = BundleGpuCode::from(*bundle);
  options.notice = [](const std::string &l) {
    std::fprintf(stderr, "%s\n", l.c_str());
  };
  if (steps || cfg) {
    SamplerRunOverrides o;
    o.steps = steps;
    o.cfgStrength = cfg;
    options.samplerOverrides["slat_stage"] = o;
  }
  Session session(bundle->program,
                  modelDirectoryWeights(bundle->weights, model), options);
  if (!outDir.empty())
    std::filesystem::create_directories(outDir);
  auto save = [&](const std::string &name, const RtValue &v) {
    if (outDir.empty())
      return;
    if (auto *t = std::get_if<HostTensor>(&v))
      if (Status s = writeNpy(outDir + "/" + name + ".npy", *t); !s)
        fail(s.message());
  };

  struct Row {
    std::string what;
    std::vector<double> ms;
    double firstWall = 0;
    size_t arena = 0, weights = 0, inUse = 0;
  };
  std::vector<Row> rows;
  auto time = [&](const std::string &fn, std::vector<RtValue> args,
                  std::vector<RtValue> &last) {
    Row row;
    row.what = fn;
    std::printf("%s on %s:\n", fn.c_str(), session.backend(fn));
    for (int r = 0; r <= reps; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      auto out = session.call(fn, args);
      if (!out)
        fail(out.message());
      double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      const GpuReport *g = session.gpuReport();
      double ms = g && std::string(session.backend(fn)) == "cuda"
                      ? g->runSeconds * 1e3
                      : wall * 1e3;
      if (r == 0)
        row.firstWall = wall;
      if (r > 0 || cpu)
        row.ms.push_back(ms);
      std::printf("  run %d: %.2f ms%s (%.2f ms wall)\n", r, ms,
                  r == 0 ? " [warm-up]" : "", wall * 1e3);
      if (g) {
        row.arena = g->arenaBytes;
        row.weights = g->weightBytes;
        row.inUse = g->deviceBytesInUse;
      }
      last = std::move(out).value();
      if (cpu)
        break; // one run is enough on the reference
    }
    if (profile && session.gpuReport()) {
      const GpuReport &g = *session.gpuReport();
      double total = 0;
      for (const auto &e : g.profile)
        total += e.ms;
      std::printf("  per-op GPU time (eager, total %.2f ms):\n", total);
      for (const auto &e : g.profile)
        if (e.ms >= 0.005 * total)
          std::printf("  | %.2f | %.1f%% | %lld | %s |\n", e.ms,
                      100 * e.ms / total, (long long)e.count, e.what.c_str());
    }
    if (const GpuReport *g = session.gpuReport(); g && profile)
      for (const std::string &line : g->tunedGemms)
        std::printf("  tuned GEMM %s\n", line.c_str());
    rows.push_back(row);
  };

  std::vector<RtValue> slat;
  time("slat_stage", {*coords, *cond, noise}, slat);
  save("slat", slat.at(0));
  if (decoders) {
    for (const char *fn : {"decode_gs", "decode_rf", "decode_mesh"}) {
      std::vector<RtValue> out;
      time(fn, {*coords, slat.at(0)}, out);
      for (size_t i = 0; i < out.size(); ++i)
        save(std::string(fn) + "_" + std::to_string(i), out[i]);
    }
  }
  const GpuReport *g = session.gpuReport();
  std::printf("\n%lld voxels; device: %s\n\n", (long long)n,
              g ? g->device.c_str() : "CPU reference");
  std::printf("| function | median ms (%d runs) | min ms | first run s | "
              "weights MiB | arena MiB | device in use MiB |\n"
              "|---|---|---|---|---|---|---|\n",
              reps);
  if (!jsonPath.empty()) {
    FILE *f = std::fopen(jsonPath.c_str(), "w");
    if (!f)
      fail("cannot write " + jsonPath);
    std::fprintf(f, "{\"voxels\": %lld, \"device\": \"%s\", \"functions\": {",
                 (long long)n, g ? g->device.c_str() : "cpu");
    for (size_t i = 0; i < rows.size(); ++i)
      std::fprintf(f,
                   "%s\"%s\": {\"median_ms\": %.3f, \"first_run_s\": %.3f, "
                   "\"weights_mib\": %.1f, \"arena_mib\": %.1f, "
                   "\"device_in_use_mib\": %.1f}",
                   i ? ", " : "", rows[i].what.c_str(), median(rows[i].ms),
                   rows[i].firstWall, rows[i].weights / 1048576.0,
                   rows[i].arena / 1048576.0, rows[i].inUse / 1048576.0);
    std::fprintf(f, "}}\n");
    std::fclose(f);
  }
  for (const Row &r : rows)
    std::printf("| %s | %.2f | %.2f | %.3f | %.1f | %.1f | %.1f |\n",
                r.what.c_str(), median(r.ms),
                r.ms.empty() ? 0.0
                             : *std::min_element(r.ms.begin(), r.ms.end()),
                r.firstWall, r.weights / 1048576.0, r.arena / 1048576.0,
                r.inUse / 1048576.0);
  return 0;
}
