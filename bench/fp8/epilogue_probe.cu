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
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "bench/fp8/lt_matmul.cuh"

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
  LtGemmBuffers buf(m, n, k);
  CK(cudaMemset(buf.a, 0x30, size_t(m) * k));
  CK(cudaMemset(buf.b, 0x30, size_t(n) * k));
  buf.setScales(1.f, 1.f, 1.f);
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
    const LtMatmul g(m, n, k, CUDA_R_8F_E4M3, f.epilogue, f.out, buf.scaleA, buf.scaleB,
                      buf.scaleD, buf.bias);
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &buf.workspaceBytes,
        sizeof(buf.workspaceBytes)));
    cublasLtMatmulHeuristicResult_t r[32] = {};
    int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(
        lt, g.desc, g.la, g.lb, g.lc, g.ld, pref, 32, r, &found);
    float first = 0.f, best = 0.f;
    int bestRank = -1, runs = 0;
    for (int i = 0; hs == CUBLAS_STATUS_SUCCESS && i < found; ++i) {
      auto call = [&] {
        return g.run(lt, r[i].algo, buf.a, buf.b, buf.d, buf.workspace,
                     buf.workspaceBytes);
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
  }
  return 0;
}
