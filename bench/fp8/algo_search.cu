// bench/fp8/algo_search.cu — does cuBLASLt hold FP8 (or fp16) kernels faster
// than the ones its heuristic returns? For one GEMM shape and epilogue form it
// times (1) every candidate the heuristic returns (up to 32; the runtime times
// its first 8, runtime/cuda/GemmCommands.cpp) and (2) every configuration of
// every algorithm cublasLtMatmulAlgoGetIds lists for the types — each tile,
// stages, cluster shape (auto, 1x1, 2x1, 1x2), CTA swizzle and custom option
// that cublasLtMatmulAlgoCheck accepts, split-K off. Each configuration is
// screened with a short median; the five best and the heuristic's best are then
// re-timed together (median of 50 calls after 10, CUDA events).
//
// A = weights [m, k] (transposed as the runtime passes them), B = activations
// [n, k], both E4M3 with per-tensor scales or (f16) both f16; f32
// accumulation; inputs random normal values (constant inputs draw less power).
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -I<repo> algo_search.cu -lcublasLt -o fp8-algo-search
//   ./fp8-algo-search M N K FORM [f16]
//     FORM: none | bias | gelu_bias (f16 D) | gelu_bias_e4m3 (E4M3 D);
//     f16: fp16 inputs (not with gelu_bias_e4m3)
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "bench/fp8/lt_matmul.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct Config {
  cublasLtMatmulAlgo_t algo;
  int id, tile, stages, cluster, swizzle, custom;
  float us = 0.f;
};

/// n random normal values as E4M3 (times 32) or f16 bytes.
std::vector<uint8_t> randomValues(size_t n, bool e4m3, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<uint8_t> v(n * (e4m3 ? 1 : 2));
  for (size_t i = 0; i < n; ++i) {
    if (e4m3) {
      v[i] = __nv_fp8_e4m3(dist(rng) * 32.f).__x;
    } else {
      const __half h = __float2half(dist(rng));
      std::memcpy(&v[2 * i], &h, 2);
    }
  }
  return v;
}

/// The ids an algorithm lists for a capability (tiles, stages), or
/// `undefined` alone when it lists none.
std::vector<uint32_t> capIds(const cublasLtMatmulAlgo_t &algo,
                             cublasLtMatmulAlgoCapAttributes_t attr,
                             uint32_t undefined) {
  size_t bytes = 0;
  std::vector<uint32_t> ids;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) ==
          CUBLAS_STATUS_SUCCESS &&
      bytes) {
    ids.resize(bytes / sizeof(uint32_t));
    CK(cublasLtMatmulAlgoCapGetAttribute(&algo, attr, ids.data(), bytes,
                                         &bytes));
  }
  if (ids.empty())
    ids.push_back(undefined);
  return ids;
}

} // namespace

int main(int argc, char **argv) {
  const bool f16 = argc == 6 && std::string(argv[5]) == "f16";
  if (argc != 5 && !f16) {
    std::fprintf(stderr,
                 "usage: %s M N K none|bias|gelu_bias|gelu_bias_e4m3 [f16]\n",
                 argv[0]);
    return 2;
  }
  const int m = std::atoi(argv[1]), n = std::atoi(argv[2]),
            k = std::atoi(argv[3]);
  const std::string form = argv[4];
  if (form != "none" && form != "bias" && form != "gelu_bias" &&
      (form != "gelu_bias_e4m3" || f16)) {
    std::fprintf(stderr, "unknown form '%s'\n", form.c_str());
    return 2;
  }
  const cublasLtEpilogue_t epilogue = form == "none" ? CUBLASLT_EPILOGUE_DEFAULT
                                      : form == "bias"
                                          ? CUBLASLT_EPILOGUE_BIAS
                                          : CUBLASLT_EPILOGUE_GELU_BIAS;
  const cudaDataType_t typeAB = f16 ? CUDA_R_16F : CUDA_R_8F_E4M3;
  const cudaDataType_t typeD =
      form == "gelu_bias_e4m3" ? CUDA_R_8F_E4M3 : CUDA_R_16F;

  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  LtGemmBuffers buf(m, n, k);
  const size_t elem = f16 ? 2 : 1;
  CK(cudaMemcpy(buf.a, randomValues(size_t(m) * k, !f16, 1).data(),
                size_t(m) * k * elem, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(buf.b, randomValues(size_t(n) * k, !f16, 2).data(),
                size_t(n) * k * elem, cudaMemcpyHostToDevice));
  buf.setScales(1.f / 32, 1.f / 32, 1.f / 64);
  const size_t ws = buf.workspaceBytes;

  const LtMatmul g(m, n, k, typeAB, epilogue, typeD, buf.scaleA, buf.scaleB,
                   buf.scaleD, buf.bias);
  auto call = [&](const cublasLtMatmulAlgo_t &algo) {
    return g.run(lt, algo, buf.a, buf.b, buf.d, buf.workspace, ws);
  };
  auto time = [&](const cublasLtMatmulAlgo_t &algo, int reps, int warmup) {
    return medianUs([&] { call(algo); }, reps, warmup);
  };

  // (1) the heuristic's candidates
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  cublasLtMatmulHeuristicResult_t r[32] = {};
  int found = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(lt, g.desc, g.la, g.lb, g.lc, g.ld, pref,
                                    32, r, &found));
  int heurBest = -1;
  float heurUs = 0.f;
  for (int i = 0; i < found; ++i) {
    if (call(r[i].algo) != CUBLAS_STATUS_SUCCESS)
      continue;
    const float us = time(r[i].algo, 10, 2);
    if (heurBest < 0 || us < heurUs)
      heurBest = i, heurUs = us;
  }
  if (heurBest < 0) {
    std::fprintf(stderr, "no heuristic candidate runs\n");
    return 1;
  }

  // (2) every configuration of every listed algorithm
  int ids[256], nids = 0;
  CK(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F,
                              typeAB, typeAB, CUDA_R_16F, typeD,
                              256, ids, &nids));
  std::vector<Config> configs;
  int checked = 0;
  for (int i = 0; i < nids; ++i) {
    cublasLtMatmulAlgo_t algo;
    if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F,
                               typeAB, typeAB, CUDA_R_16F,
                               typeD, ids[i], &algo) != CUBLAS_STATUS_SUCCESS)
      continue;
    const std::vector<uint32_t> tiles = capIds(
        algo, CUBLASLT_ALGO_CAP_TILE_IDS, CUBLASLT_MATMUL_TILE_UNDEFINED);
    const std::vector<uint32_t> stages = capIds(
        algo, CUBLASLT_ALGO_CAP_STAGES_IDS, CUBLASLT_MATMUL_STAGES_UNDEFINED);
    size_t bytes = 0;
    int32_t swizzleSupport = 0, customMax = 0;
    CK(cublasLtMatmulAlgoCapGetAttribute(
        &algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swizzleSupport,
        sizeof(swizzleSupport), &bytes));
    CK(cublasLtMatmulAlgoCapGetAttribute(&algo,
                                         CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX,
                                         &customMax, sizeof(customMax), &bytes));
    const uint16_t clusters[] = {CUBLASLT_CLUSTER_SHAPE_AUTO,
                                 CUBLASLT_CLUSTER_SHAPE_1x1x1,
                                 CUBLASLT_CLUSTER_SHAPE_2x1x1,
                                 CUBLASLT_CLUSTER_SHAPE_1x2x1};
    for (uint32_t tile : tiles)
      for (uint32_t st : stages)
        for (uint16_t cl : clusters)
          for (uint32_t sw = 0; sw <= (swizzleSupport ? 1u : 0u); ++sw)
            for (int32_t co = 0; co <= std::min(customMax, 7); ++co) {
              Config c{algo, ids[i], int(tile), int(st), int(cl), int(sw), co};
              const int32_t splitK = 1;
              CK(cublasLtMatmulAlgoConfigSetAttribute(
                  &c.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile)));
              CK(cublasLtMatmulAlgoConfigSetAttribute(
                  &c.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &st, sizeof(st)));
              CK(cublasLtMatmulAlgoConfigSetAttribute(
                  &c.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl,
                  sizeof(cl)));
              CK(cublasLtMatmulAlgoConfigSetAttribute(
                  &c.algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &sw,
                  sizeof(sw)));
              CK(cublasLtMatmulAlgoConfigSetAttribute(
                  &c.algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &co,
                  sizeof(co)));
              CK(cublasLtMatmulAlgoConfigSetAttribute(
                  &c.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitK,
                  sizeof(splitK)));
              cublasLtMatmulHeuristicResult_t res;
              ++checked;
              if (cublasLtMatmulAlgoCheck(lt, g.desc, g.la, g.lb, g.lc, g.ld,
                                          &c.algo,
                                          &res) != CUBLAS_STATUS_SUCCESS ||
                  res.workspaceSize > ws)
                continue;
              if (call(c.algo) != CUBLAS_STATUS_SUCCESS) {
                cudaGetLastError();
                continue;
              }
              c.us = time(c.algo, 5, 1);
              configs.push_back(c);
            }
  }
  std::sort(configs.begin(), configs.end(),
            [](const Config &x, const Config &y) { return x.us < y.us; });
  configs.resize(std::min<size_t>(configs.size(), 5));

  // the finalists and the heuristic's best, re-timed together
  std::printf("m %d n %d k %d (%.1f GFLOP), %s, form %s: %d algorithms listed, "
              "%d configurations checked, heuristic %d candidates\n",
              m, n, k, 2.0 * m * n * k * 1e-9, f16 ? "f16" : "E4M3",
              form.c_str(), nids, checked, found);
  for (int round = 0; round < 2; ++round) {
    const float h = time(r[heurBest].algo, 50, 10);
    std::printf("  round %d: heuristic's best (rank %d) %.1f us\n", round,
                heurBest, h);
    for (const Config &c : configs) {
      const float us = time(c.algo, 50, 10);
      std::printf("    algo %d tile %d stages %d cluster %d swizzle %d custom "
                  "%d: %.1f us (%.3fx the heuristic's)\n",
                  c.id, c.tile, c.stages, c.cluster, c.swizzle, c.custom, us,
                  h / us);
    }
  }
  return 0;
}
