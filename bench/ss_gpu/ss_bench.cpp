//===- ss_bench.cpp - Times a compiled dense stage on the GPU -------------===//
//
// trellis-ss-bench --exe trellis.exe --model DIR [--reps N] [--no-graphs]
//                  [--function ss_stage|image_stage] [--bundle FILE]
//
// Loads the bundle embedded in a trellis.exe compiled for CUDA (or a bundle
// file), runs its ss_stage (the 25-step guided flow sampler + the SS decoder +
// occupancy) on the model's cond.npy with seeded noise, or its image_stage
// (the image-conditioning model) on a seeded normal image, once to warm up
// (module load, weight staging, graph capture) and then N times, and prints a
// table: the GPU time per run (CUDA events around the stage), the median, the
// staged weight bytes, the arena, and the device memory in use. Not a test: a
// benchmark.
//
//===----------------------------------------------------------------------===//
#include "trellis/Format/Npy.h"
#include "trellis/Runtime/Runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace trellis;

int main(int argc, char **argv) {
  std::string exe, bundlePath, model, attention,
      norms = "q-fused", softmax = "fixed", function = "ss_stage";
  int reps = 5;
  SamplerRunOverrides overrides; // --steps, --cfg (ss_stage)
  bool graphs = true, profile = false, tune = true, concurrent = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--bundle" && i + 1 < argc)
      bundlePath = argv[++i];
    else if (a == "--function" && i + 1 < argc &&
             (std::strcmp(argv[i + 1], "ss_stage") == 0 ||
              std::strcmp(argv[i + 1], "image_stage") == 0))
      function = argv[++i];
    else if (a == "--steps" && i + 1 < argc)
      overrides.steps = std::atoll(argv[++i]);
    else if (a == "--cfg" && i + 1 < argc)
      overrides.cfgStrength = std::atof(argv[++i]);
    else if (a == "--exe" && i + 1 < argc)
      exe = argv[++i];
    else if (a == "--model" && i + 1 < argc)
      model = argv[++i];
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--no-graphs")
      graphs = false;
    else if (a == "--profile")
      profile = true;
    else if (a == "--no-gemm-tuning")
      tune = false;
    else if (a == "--no-concurrent-branches")
      concurrent = false;
    else if (a == "--attention" && i + 1 < argc)
      attention = argv[++i];
    else if (a == "--attention-norms" && i + 1 < argc)
      norms = argv[++i];
    else if (a == "--attention-softmax" && i + 1 < argc &&
             (std::string(argv[i + 1]) == "fixed" ||
              std::string(argv[i + 1]) == "online"))
      softmax = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s --exe trellis.exe|--bundle FILE --model DIR "
                   "[--function ss_stage|image_stage] [--reps N] [--steps N] "
                   "[--cfg W]\n       "
                   "[--no-graphs] [--profile] [--no-gemm-tuning] "
                   "[--no-concurrent-branches] [--attention CONFIG]\n       "
                   "[--attention-norms q-fused|prepass|fused] "
                   "[--attention-softmax fixed|online]\n",
                   argv[0]);
      return 2;
    }
  }
  auto bundle = bundlePath.empty()
                    ? LoadedBundle::load(exe, /*embedded=*/true)
                    : LoadedBundle::load(bundlePath, /*embedded=*/false);
  if (!bundle) {
    std::fprintf(stderr, "error: %s\n", bundle.message().c_str());
    return 1;
  }
  auto cond = readNpy(model + "/cond.npy");
  if (!cond) {
    std::fprintf(stderr, "error: %s\n", cond.message().c_str());
    return 1;
  }
  const Function *ss = bundle->program.find(function);
  if (!ss) {
    std::fprintf(stderr, "error: the bundle has no %s\n", function.c_str());
    return 1;
  }
  // ss_stage: (cond..., noise); image_stage: (image).
  HostTensor noise(DType::F32, ss->argTypes.back().shape);
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < noise.numel(); ++i)
    noise.mutableData<float>()[i] = normal(gen);
  const bool image = function == "image_stage";

  SessionOptions options;
  options.gpu.mode = GpuMode::Require;
  options.gpu.options.cudaGraphs = graphs;
  options.gpu.options.profile = profile;
  options.gpu.options.tuneGemms = tune;
  options.gpu.options.concurrentBranches = concurrent;
  options.gpu.options.attentionConfig = attention;
  options.gpu.options.attentionNorms = norms;
  options.gpu.options.attentionSoftmax = softmax;
  options.gpuCode = BundleGpuCode::from(*bundle);
  options.samplerOverrides["ss_stage"] = overrides;
  options.notice = [](const std::string &l) {
    std::fprintf(stderr, "%s\n", l.c_str());
  };
  Session session(bundle->program,
                  modelDirectoryWeights(bundle->weights, model), options);
  if (std::string(session.backend(function)) != "cuda") {
    std::fprintf(stderr, "error: %s does not run on the GPU here\n",
                 function.c_str());
    return 1;
  }
  std::vector<double> gpuMs;
  double firstWallS = 0;
  for (int r = 0; r <= reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<RtValue> args;
    for (size_t i = 0; !image && i + 1 < ss->argTypes.size(); ++i)
      args.push_back(*cond);
    args.push_back(noise);
    auto out = session.call(function, std::move(args));
    if (!out) {
      std::fprintf(stderr, "error: %s\n", out.message().c_str());
      return 1;
    }
    double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    const GpuReport &g = *session.gpuReport();
    if (r == 0) {
      firstWallS = wall;
      std::printf("warm-up run: %.3f s wall (weights %zu MiB staged in %.3f "
                  "s, arena %zu MiB)",
                  wall, g.weightBytes >> 20, g.weightUploadSeconds,
                  g.arenaBytes >> 20);
      if (!image)
        std::printf("; %lld occupied voxels",
                    (long long)std::get<HostTensor>((*out)[1]).dim(0));
      std::printf("\n");
      continue;
    }
    gpuMs.push_back(g.runSeconds * 1e3);
    std::printf("run %d: %.2f ms GPU (%.2f ms wall), %lld commands\n", r,
                g.runSeconds * 1e3, wall * 1e3, (long long)g.commands);
  }
  std::vector<double> sorted = gpuMs;
  std::sort(sorted.begin(), sorted.end());
  const GpuReport &g = *session.gpuReport();
  std::printf("\n| what | value |\n|---|---|\n");
  std::printf("| device | %s |\n", g.device.c_str());
  std::printf("| CUDA graphs | %s |\n", graphs ? "on" : "off");
  std::printf("| %s median (GPU events, %d runs) | %.2f ms |\n",
              function.c_str(), reps,
              sorted.empty() ? 0.0 : sorted[sorted.size() / 2]);
  std::printf("| %s min / max | %.2f / %.2f ms |\n", function.c_str(),
              sorted.empty() ? 0.0 : sorted.front(),
              sorted.empty() ? 0.0 : sorted.back());
  std::printf("| first run (load, staging, capture) | %.3f s |\n", firstWallS);
  std::printf("| weights on device | %.1f MiB |\n", g.weightBytes / 1048576.0);
  std::printf("| activation arena | %.1f MiB |\n", g.arenaBytes / 1048576.0);
  std::printf("| device memory in use (incl. context) | %.1f MiB |\n",
              g.deviceBytesInUse / 1048576.0);
  if (profile) {
    double total = 0;
    for (const auto &e : g.profile)
      total += e.ms;
    std::printf("\nper-op GPU time of the last run (eager launches, events "
                "per command; total %.2f ms):\n| ms | %% | count | op |\n"
                "|---|---|---|---|\n",
                total);
    for (const auto &e : g.profile)
      if (e.ms >= 0.002 * total)
        std::printf("| %.2f | %.1f | %lld | %s |\n", e.ms, 100 * e.ms / total,
                    (long long)e.count, e.what.c_str());
  }
  if (profile)
    for (const std::string &line : g.tunedGemms)
      std::printf("tuned GEMM %s\n", line.c_str());
  return 0;
}
