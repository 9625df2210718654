// bench/fp8/algo_search.cu — does cuBLASLt hold FP8 kernels faster than the
// ones its heuristic returns? For one GEMM shape and epilogue form it times
// (1) every candidate the heuristic returns (up to 32; the runtime times its
// first 8, runtime/cuda/GemmCommands.cpp) and (2) every configuration of every
// algorithm cublasLtMatmulAlgoGetIds lists for E4M3 inputs — each tile,
// stages, cluster shape (auto, 1x1, 2x1, 1x2), CTA swizzle and custom option
// that cublasLtMatmulAlgoCheck accepts, split-K off. Each configuration is
// screened with a short median; the five best and the heuristic's best are then
// re-timed together (median of 50 calls after 10, CUDA events).
//
// A = weights [m, k] (E4M3, transposed as the runtime passes them),
// B = activations [n, k] (E4M3), per-tensor scales, f32 accumulation; inputs
// random normal values quantized to E4M3 (constant inputs draw less power).
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -I<repo> algo_search.cu -lcublasLt -o fp8-algo-search
//   ./fp8-algo-search M N K FORM      FORM: none | bias | gelu_bias_e4m3
#include <cublasLt.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "bench/fp8/bench_timing.cuh"

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

std::vector<uint8_t> randomE4M3(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<uint8_t> v(n);
  for (auto &x : v)
    x = __nv_fp8_e4m3(dist(rng) * 32.f).__x;
  return v;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s M N K none|bias|gelu_bias_e4m3\n", argv[0]);
    return 2;
  }
  const int m = std::atoi(argv[1]), n = std::atoi(argv[2]),
            k = std::atoi(argv[3]);
  const std::string form = argv[4];
  if (form != "none" && form != "bias" && form != "gelu_bias_e4m3") {
    std::fprintf(stderr, "unknown form '%s'\n", form.c_str());
    return 2;
  }
  const cublasLtEpilogue_t epilogue = form == "none" ? CUBLASLT_EPILOGUE_DEFAULT
                                      : form == "bias"
                                          ? CUBLASLT_EPILOGUE_BIAS
                                          : CUBLASLT_EPILOGUE_GELU_BIAS;
  const cudaDataType_t typeD =
      form == "gelu_bias_e4m3" ? CUDA_R_8F_E4M3 : CUDA_R_16F;

  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  const size_t ws = size_t(32) << 20;
  void *workspace, *a, *b, *d, *bias;
  float *scales; // 256-byte slots: A, B, D scales
  CK(cudaMalloc(&workspace, ws));
  CK(cudaMalloc(&a, size_t(m) * k));
  CK(cudaMalloc(&b, size_t(n) * k));
  CK(cudaMalloc(&d, size_t(m) * n * 2));
  CK(cudaMalloc(&bias, size_t(m) * 2));
  CK(cudaMalloc(&scales, 3 * 256));
  CK(cudaMemcpy(a, randomE4M3(size_t(m) * k, 1).data(), size_t(m) * k,
                cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, randomE4M3(size_t(n) * k, 2).data(), size_t(n) * k,
                cudaMemcpyHostToDevice));
  CK(cudaMemset(bias, 0, size_t(m) * 2));
  const float scaleValues[3] = {1.f / 32, 1.f / 32, 1.f / 64};
  for (int i = 0; i < 3; ++i)
    CK(cudaMemcpy(reinterpret_cast<char *>(scales) + 256 * i, &scaleValues[i],
                  sizeof(float), cudaMemcpyHostToDevice));

  cublasLtMatmulDesc_t desc;
  CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t,
                                    sizeof(t)));
  CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn,
                                    sizeof(nn)));
  const void *sa = scales, *sb = reinterpret_cast<char *>(scales) + 256,
             *sd = reinterpret_cast<char *>(scales) + 512;
  CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                    &sa, sizeof(sa)));
  CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                    &sb, sizeof(sb)));
  if (typeD == CUDA_R_8F_E4M3)
    CK(cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &sd, sizeof(sd)));
  CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                    &epilogue, sizeof(epilogue)));
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    cudaDataType_t bt = CUDA_R_16F;
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                      &bt, sizeof(bt)));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                      &bias, sizeof(bias)));
  }
  cublasLtMatrixLayout_t la, lb, lc, ld;
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k));
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n, k));
  CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, m, n, m));
  CK(cublasLtMatrixLayoutCreate(&ld, typeD, m, n, m));
  const float alpha = 1.f, beta = 0.f;
  auto call = [&](const cublasLtMatmulAlgo_t &algo) {
    return cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, nullptr, lc,
                          d, ld, &algo, workspace, ws, 0);
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
  CK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 32, r,
                                    &found));
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
                              CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16F, typeD,
                              256, ids, &nids));
  std::vector<Config> configs;
  int checked = 0;
  for (int i = 0; i < nids; ++i) {
    cublasLtMatmulAlgo_t algo;
    if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F,
                               CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16F,
                               typeD, ids[i], &algo) != CUBLAS_STATUS_SUCCESS)
      continue;
    size_t bytes = 0;
    std::vector<uint32_t> tiles, stages;
    if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS,
                                          nullptr, 0, &bytes) ==
            CUBLAS_STATUS_SUCCESS &&
        bytes) {
      tiles.resize(bytes / 4);
      CK(cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS,
                                           tiles.data(), bytes, &bytes));
    }
    if (tiles.empty())
      tiles.push_back(CUBLASLT_MATMUL_TILE_UNDEFINED);
    if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS,
                                          nullptr, 0, &bytes) ==
            CUBLAS_STATUS_SUCCESS &&
        bytes) {
      stages.resize(bytes / 4);
      CK(cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS,
                                           stages.data(), bytes, &bytes));
    }
    if (stages.empty())
      stages.push_back(CUBLASLT_MATMUL_STAGES_UNDEFINED);
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
              if (cublasLtMatmulAlgoCheck(lt, desc, la, lb, lc, ld, &c.algo,
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
  std::printf("m %d n %d k %d (%.1f GFLOP), form %s: %d algorithms listed, "
              "%d configurations checked, heuristic %d candidates\n",
              m, n, k, 2.0 * m * n * k * 1e-9, form.c_str(), nids, checked,
              found);
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
