// bench/fp8/lt_matmul.cuh — the cuBLASLt GEMM that epilogue_probe.cu and
// algo_search.cu time, set up as the runtime sets up the flow linears'
// (runtime/cuda/GemmCommands.cpp): D [m outputs, n tokens] = epilogue(A^T B)
// with A the weights (k x m, transposed), B the activations (k x n), both
// E4M3 with per-tensor A and B scales or both f16; f32 accumulation, C f16
// (unread at beta = 0), D f16 or E4M3 (then with a D scale), an f16 bias for
// the bias epilogues.
#ifndef TRELLIS_BENCH_FP8_LT_MATMUL_CUH
#define TRELLIS_BENCH_FP8_LT_MATMUL_CUH

#include "bench/fp8/bench_timing.cuh"

#include <cublasLt.h>

#include <utility>

struct LtMatmul {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr,
                         ld = nullptr;

  /// `typeAB`: CUDA_R_8F_E4M3 (with the A, B and D scales, device floats) or
  /// CUDA_R_16F (no scales); `bias`: m halves.
  LtMatmul(int m, int n, int k, cudaDataType_t typeAB,
           cublasLtEpilogue_t epilogue, cudaDataType_t typeD,
           const float *scaleA, const float *scaleB, const float *scaleD,
           const void *bias) {
    CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    set(CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
    set(CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn));
    if (typeAB == CUDA_R_8F_E4M3) {
      set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scaleA, sizeof(scaleA));
      set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scaleB, sizeof(scaleB));
    }
    if (typeD == CUDA_R_8F_E4M3)
      set(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &scaleD, sizeof(scaleD));
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
    if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      const cudaDataType_t bt = CUDA_R_16F;
      set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt));
      set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
    }
    CK(cublasLtMatrixLayoutCreate(&la, typeAB, k, m, k));
    CK(cublasLtMatrixLayoutCreate(&lb, typeAB, k, n, k));
    // an E4M3 D needs a C of another type
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, m, n, m));
    CK(cublasLtMatrixLayoutCreate(&ld, typeD, m, n, m));
  }
  LtMatmul(const LtMatmul &) = delete;
  LtMatmul &operator=(const LtMatmul &) = delete;
  ~LtMatmul() {
    for (auto l : {la, lb, lc, ld})
      cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(desc);
  }

  /// One call with `algo` on stream 0 (alpha 1, beta 0).
  cublasStatus_t run(cublasLtHandle_t lt, const cublasLtMatmulAlgo_t &algo,
                     const void *a, const void *b, void *d, void *workspace,
                     size_t workspaceBytes) const {
    const float alpha = 1.f, beta = 0.f;
    return cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, nullptr, lc,
                          d, ld, &algo, workspace, workspaceBytes, 0);
  }

private:
  void set(cublasLtMatmulDescAttributes_t attr, const void *value,
           size_t bytes) {
    CK(cublasLtMatmulDescSetAttribute(desc, attr, value, bytes));
  }
};

/// The device buffers of one m x n x k GEMM: a 32 MiB workspace, A
/// (m x k halves: room for either input type), B (n x k), D (m x n halves), the
/// bias (m halves, zero) and the A, B and D scales (256 bytes apart, set by
/// the caller). Freed with the process.
struct LtGemmBuffers {
  const size_t workspaceBytes = size_t(32) << 20;
  void *workspace = nullptr, *a = nullptr, *b = nullptr, *d = nullptr,
       *bias = nullptr;
  float *scaleA = nullptr, *scaleB = nullptr, *scaleD = nullptr;

  LtGemmBuffers(int m, int n, int k) {
    CK(cudaMalloc(&workspace, workspaceBytes));
    CK(cudaMalloc(&a, size_t(m) * k * 2));
    CK(cudaMalloc(&b, size_t(n) * k * 2));
    CK(cudaMalloc(&d, size_t(m) * n * 2));
    CK(cudaMalloc(&bias, size_t(m) * 2));
    CK(cudaMemset(bias, 0, size_t(m) * 2));
    CK(cudaMalloc(&scaleA, 3 * 256));
    scaleB = scaleA + 64;
    scaleD = scaleA + 128;
  }
  void setScales(float a, float b, float d) {
    for (auto [at, v] : {std::pair{scaleA, a}, {scaleB, b}, {scaleD, d}})
      CK(cudaMemcpy(at, &v, sizeof(float), cudaMemcpyHostToDevice));
  }
};

#endif // TRELLIS_BENCH_FP8_LT_MATMUL_CUH
