// trellis-flexicubes-bench: FlexiCubes extraction on the GPU against the CPU
// reference (bench/mesh_gpu/README.md).
//   (a) parity: analytic sphere and box (the unit test's fields), the unit
//       test's random field, a sparse random field and a decoder-like shell:
//       vertex and face counts, faces identical, max position and attribute
//       difference;
//   (b) timing of the GPU extraction of a 20k-voxel decoder-like output at
//       256^3 (median of --reps after a warm-up): wall clock of the whole
//       call and the GPU-event split upload / kernels / download.
//
//   trellis-flexicubes-bench [--reps N] [--no-parity] [--no-timing]
//                            [--tolerance T] [--max-cubes N]
//                            [--npz mesh_fields.npz --resolution R]...
// (--max-cubes: skip parity cases with more input cubes, e.g. under
// compute-sanitizer; --npz: also a parity case on a trellis.exe
// mesh_fields.npz, coords and fields, at resolution R, default 256;
// --only-npz: no built-in cases.)
// Exit status 1 when a parity check fails.
#include "test/unit/mesh/FlexiCubesFields.h"

#include "trellis/Format/Npy.h"
#include "trellis/Mesh/FlexiCubes.h"
#include "trellis/Runtime/GpuExecutor.h"
#include "trellis/Runtime/Program.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace trellis {
std::string_view embeddedImage(std::string_view name);
} // namespace trellis

using namespace trellis;
using Clock = std::chrono::steady_clock;

namespace {

int64_t gMaxCubes = INT64_MAX;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double maxAbsDiff(const HostTensor &a, const HostTensor &b) {
  const float *x = a.data<float>(), *y = b.data<float>();
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::fabs(double(x[i]) - double(y[i])));
  return m;
}

bool parityCase(GpuExecutor &gpu, const char *name,
                const meshfields::FieldInput &in, int R, double tol) {
  if (in.coords.dim(0) > gMaxCubes) {
    std::printf("| %-22s | %4d | %8lld | skipped (--max-cubes) |\n", name, R,
                (long long)in.coords.dim(0));
    return true;
  }
  auto t0 = Clock::now();
  auto cpu = mesh::extractFlexiCubes(in.coords, in.fields, R);
  double cpuMs = msSince(t0);
  t0 = Clock::now();
  auto g = gpu.extractFlexiCubes(in.coords, in.fields, R);
  double gpuMs = msSince(t0);
  if (!cpu || !g) {
    std::printf("| %-22s | %4d | error: %s |\n", name, R,
                (!cpu ? cpu.message() : g.message()).c_str());
    return false;
  }
  const mesh::MeshResult &a = *cpu, &b = *g;
  bool sameCounts = a.vertices.dim(0) == b.vertices.dim(0) &&
                    a.faces.dim(0) == b.faces.dim(0);
  bool sameFaces =
      sameCounts && std::memcmp(a.faces.data<int32_t>(),
                                b.faces.data<int32_t>(), a.faces.nbytes()) == 0;
  double dPos = sameCounts ? maxAbsDiff(a.vertices, b.vertices) : INFINITY;
  double dAttr =
      sameCounts ? maxAbsDiff(a.vertexAttrs, b.vertexAttrs) : INFINITY;
  bool sameStats = a.candidateCubes == b.candidateCubes &&
                   a.surfaceCubes == b.surfaceCubes &&
                   a.resolvedAmbiguities == b.resolvedAmbiguities;
  bool pass =
      sameCounts && sameFaces && sameStats && dPos <= tol && dAttr <= tol;
  std::printf(
      "| %-22s | %4d | %8lld | %8lld/%-8lld | %8lld/%-8lld | %6lld/%-6lld "
      "| %s | %9.2e | %9.2e | %8.1f | %7.1f | %s |\n",
      name, R, (long long)in.coords.dim(0), (long long)a.vertices.dim(0),
      (long long)b.vertices.dim(0), (long long)a.faces.dim(0),
      (long long)b.faces.dim(0), (long long)a.resolvedAmbiguities,
      (long long)b.resolvedAmbiguities, sameFaces ? "yes" : " NO", dPos, dAttr,
      cpuMs, gpuMs, pass ? "PASS" : "FAIL");
  if (!sameStats)
    std::printf("    candidates %lld/%lld surface %lld/%lld\n",
                (long long)a.candidateCubes, (long long)b.candidateCubes,
                (long long)a.surfaceCubes, (long long)b.surfaceCubes);
  if (sameCounts && !sameFaces) {
    const int32_t *x = a.faces.data<int32_t>(), *y = b.faces.data<int32_t>();
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < a.faces.numel(); ++i)
      if (x[i] != y[i]) {
        if (first < 0)
          first = i / 3;
        ++bad;
      }
    std::printf("    %lld face indices differ, first at face %lld: cpu (%d %d "
                "%d) gpu (%d %d %d)\n",
                (long long)bad, (long long)first, x[3 * first],
                x[3 * first + 1], x[3 * first + 2], y[3 * first],
                y[3 * first + 1], y[3 * first + 2]);
  }
  std::fflush(stdout);
  return pass;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  int reps = 10;
  bool parity = true, timing = true;
  double tol = 1e-5;
  int64_t maxCubes = INT64_MAX;
  std::vector<std::pair<std::string, int>> npzs;
  int npzResolution = 256;
  bool builtin = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--no-parity")
      parity = false;
    else if (a == "--no-timing")
      timing = false;
    else if (a == "--tolerance" && i + 1 < argc)
      tol = std::atof(argv[++i]);
    else if (a == "--only-npz")
      builtin = false;
    else if (a == "--npz" && i + 1 < argc)
      npzs.push_back({argv[++i], 0});
    else if (a == "--resolution" && i + 1 < argc)
      npzResolution = std::atoi(argv[++i]);
    else if (a == "--max-cubes" && i + 1 < argc)
      maxCubes = std::atoll(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: trellis-flexicubes-bench [--reps N] [--no-parity] "
                   "[--no-timing] [--tolerance T] [--max-cubes N]\n");
      return 2;
    }
  }
  gMaxCubes = maxCubes;
  // No bundle: an empty program and the runtime kernel images built into
  // this binary (the ones trellisc puts into CUDA bundles).
  Program program;
  GpuImages images;
  images.attnSm90a = std::string(embeddedImage("attn_sm_90a"));
  images.attnCompute80 = std::string(embeddedImage("attn_compute_80"));
  images.attnCompute75 = std::string(embeddedImage("attn_compute_75"));
  auto gpu = GpuExecutor::create(program, images, nullptr, GpuOptions{});
  if (!gpu) {
    std::fprintf(stderr, "no GPU: %s\n", gpu.message().c_str());
    return 2;
  }
  GpuExecutor &g = **gpu;
  std::printf("device: %s (sm_%d)\n\n", g.report().device.c_str(),
              g.report().computeCapability);

  bool ok = true;
  int64_t voxels = 0;
  meshfields::FieldInput shell =
      meshfields::shellInput(64, 0.35, 1.6, 1.0, 7, &voxels);
  if (parity) {
    std::printf("## Parity, GPU vs CPU (tolerance %.0e)\n\n", tol);
    std::printf(
        "| case                   |    R |  N cubes | V cpu/gpu         "
        "| F cpu/gpu         | resolved cpu/gpu | faces same | max |dpos| "
        "| max |dattr| | cpu ms | gpu ms | |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    if (builtin) {
      ok &= parityCase(
          g, "sphere r=0.3",
          meshfields::analyticInput(meshfields::sphereSdf(0.3), 64), 64, tol);
      ok &= parityCase(
          g, "sphere r=0.3",
          meshfields::analyticInput(meshfields::sphereSdf(0.3), 128), 128, tol);
      ok &= parityCase(g, "box",
                       meshfields::analyticInput(meshfields::boxSdf(64), 64),
                       64, tol);
      ok &= parityCase(g, "random dense", meshfields::randomInput(16, 12345),
                       16, tol);
      ok &= parityCase(g, "random dense", meshfields::randomInput(48, 99), 48,
                       tol);
      ok &= parityCase(g, "random 60% kept",
                       meshfields::randomInput(40, 5, 0.6), 40, tol);
      ok &= parityCase(g, "random 60% kept, R=33",
                       meshfields::randomInput(33, 6, 0.6), 33, tol);
      ok &= parityCase(g, "shell 20k voxels", shell, 256, tol);
    }
    gMaxCubes = INT64_MAX; // --max-cubes is for the built-in cases
    for (auto &[path, unused] : npzs) {
      (void)unused;
      auto arrays = readNpz(path);
      if (!arrays) {
        std::printf("%s: %s\n", path.c_str(), arrays.message().c_str());
        ok = false;
        continue;
      }
      meshfields::FieldInput in;
      for (auto &[name, t] : *arrays) {
        if (name == "coords")
          in.coords = t;
        if (name == "fields")
          in.fields = t;
      }
      std::string label = path.substr(path.find_last_of('/') + 1);
      ok &= parityCase(g, label.c_str(), in, npzResolution, tol);
    }
    std::printf("\n");
  }
  if (timing) {
    std::printf("## GPU extraction time, decoder-like shell: %lld voxels -> "
                "%lld cubes at 256^3, median of %d (after 2 warm-up runs)\n\n",
                (long long)voxels, (long long)shell.coords.dim(0), reps);
    std::vector<double> wall, up, comp, down;
    int64_t nv = 0, nf = 0;
    for (int i = 0; i < reps + 2; ++i) {
      auto t0 = Clock::now();
      auto r = g.extractFlexiCubes(shell.coords, shell.fields, 256);
      double ms = msSince(t0);
      if (!r) {
        std::printf("error: %s\n", r.message().c_str());
        return 1;
      }
      nv = r->vertices.dim(0);
      nf = r->faces.dim(0);
      if (i < 2)
        continue;
      wall.push_back(ms);
      up.push_back(g.report().flexiUploadMs);
      comp.push_back(g.report().flexiComputeMs);
      down.push_back(g.report().flexiDownloadMs);
    }
    std::printf("| V | F | wall ms (whole call) | upload ms | kernels ms | "
                "download ms |\n|---|---|---|---|---|---|\n");
    std::printf("| %lld | %lld | %.2f | %.2f | %.2f | %.2f |\n\n",
                (long long)nv, (long long)nf, median(wall), median(up),
                median(comp), median(down));
  }
  std::printf("%s\n", ok ? "parity: all PASS" : "parity: FAIL");
  return ok ? 0 : 1;
}
