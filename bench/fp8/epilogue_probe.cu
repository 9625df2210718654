// bench/fp8/epilogue_probe.cu — what the epilogue costs an FP8 GEMM, and
// whether cuBLASLt's heuristic hides faster algorithms past the 8 candidates
// the runtime times (runtime/cuda/GemmCommands.cpp). For one shape (default
// the SS fc1: m = 4096 outputs, n = 4096 tokens, k = 1024), E4M3 inputs with
// per-tensor scales, f32 accumulation, it asks the heuristic for up to 32
// algorithms per form —
//   none / f16 D, bias / f16 D, GELU + bias / f16 D,
//   bias / E4M3 D, GELU + bias / E4M3 D (fc1 as the static program runs it)
// — times every candidate that runs (CUDA events, median of 30 calls after 5)
// and prints the first candidate's time, the best and its rank.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -I<repo> epilogue_probe.cu -lcublasLt -o epilogue-probe
//   ./epilogue-probe [M N K]
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "bench/fp8/bench_timing.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv) {
  const int m = argc > 3 ? std::atoi(argv[1]) : 4096;
  const int n = argc > 3 ? std::atoi(argv[2]) : 4096;
  const int k = argc > 3 ? std::atoi(argv[3]) : 1024;
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  const size_t ws = size_t(32) << 20;
  void *workspace, *a, *b, *d, *bias;
  float *scales; // 256-byte slots: A, B, D scales (1.0)
  CK(cudaMalloc(&workspace, ws));
  CK(cudaMalloc(&a, size_t(m) * k));
  CK(cudaMalloc(&b, size_t(n) * k));
  CK(cudaMalloc(&d, size_t(m) * n * 2));
  CK(cudaMalloc(&bias, size_t(m) * 2));
  CK(cudaMalloc(&scales, 3 * 256));
  CK(cudaMemset(a, 0x30, size_t(m) * k));
  CK(cudaMemset(b, 0x30, size_t(n) * k));
  CK(cudaMemset(bias, 0, size_t(m) * 2));
  const float one = 1.f;
  for (int i = 0; i < 3; ++i)
    CK(cudaMemcpy(reinterpret_cast<char *>(scales) + 256 * i, &one,
                  sizeof(one), cudaMemcpyHostToDevice));
  struct Form {
    const char *name;
    cublasLtEpilogue_t epilogue;
    cudaDataType_t out;
  } forms[] = {
      {"none, f16 D", CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_16F},
      {"bias, f16 D", CUBLASLT_EPILOGUE_BIAS, CUDA_R_16F},
      {"GELU + bias, f16 D", CUBLASLT_EPILOGUE_GELU_BIAS, CUDA_R_16F},
      {"bias, E4M3 D", CUBLASLT_EPILOGUE_BIAS, CUDA_R_8F_E4M3},
      {"GELU + bias, E4M3 D", CUBLASLT_EPILOGUE_GELU_BIAS, CUDA_R_8F_E4M3},
  };
  std::printf("m %d n %d k %d (%.1f GFLOP), E4M3 inputs, f32 accumulation\n", m,
              n, k, 2.0 * m * n * k * 1e-9);
  std::printf("%-22s %10s %12s %10s %8s\n", "form", "candidates",
              "first (us)", "best (us)", "rank");
  for (const Form &f : forms) {
    cublasLtMatmulDesc_t desc;
    CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t,
                                      sizeof(t)));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn,
                                      sizeof(nn)));
    const void *sa = scales, *sb = reinterpret_cast<char *>(scales) + 256,
               *sd = reinterpret_cast<char *>(scales) + 512;
    CK(cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa)));
    CK(cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb)));
    if (f.out == CUDA_R_8F_E4M3)
      CK(cublasLtMatmulDescSetAttribute(
          desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &sd, sizeof(sd)));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                      &f.epilogue, sizeof(f.epilogue)));
    if (f.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      cudaDataType_t bt = CUDA_R_16F;
      CK(cublasLtMatmulDescSetAttribute(
          desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
      CK(cublasLtMatmulDescSetAttribute(
          desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    cublasLtMatrixLayout_t la, lb, lc, ld;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n, k));
    // C (unread at beta = 0) in f16, D as the form says (an E4M3 D needs
    // a C of another type).
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, m, n, m));
    CK(cublasLtMatrixLayoutCreate(&ld, f.out, m, n, m));
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t r[32] = {};
    int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc,
                                                       ld, pref, 32, r, &found);
    const float alpha = 1.f, beta = 0.f;
    float first = 0.f, best = 0.f;
    int bestRank = -1, runs = 0;
    for (int i = 0; hs == CUBLAS_STATUS_SUCCESS && i < found; ++i) {
      auto call = [&] {
        return cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, nullptr,
                              lc, d, ld, &r[i].algo, workspace, ws, 0);
      };
      if (call() != CUBLAS_STATUS_SUCCESS)
        continue;
      ++runs;
      float us = medianUs(call, 30, 5);
      if (bestRank < 0)
        first = us;
      if (bestRank < 0 || us < best) {
        best = us;
        bestRank = i;
      }
    }
    std::printf("%-22s %6d (%2d run) %10.1f %10.1f %8d\n", f.name, found, runs,
                first, best, bestRank);
    cublasLtMatmulPreferenceDestroy(pref);
    for (auto l : {la, lb, lc, ld})
      cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(desc);
  }
  return 0;
}
