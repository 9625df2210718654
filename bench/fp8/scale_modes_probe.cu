// bench/fp8/scale_modes_probe.cu — which cuBLASLt FP8 (E4M3) scale modes this
// GPU and cuBLASLt run, at the SS qkv shape (m 3072, n 4096, k 1024, "TN"):
// per-tensor scalars against CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F (a
// scale per output channel of the weight, A, and per token of the
// activation, B), with and without the GELU + bias epilogue and an E4M3 D
// (what the runtime's fc1 → fc2 fusion needs). Prints per case whether the
// heuristic finds an algorithm, the matmul status, the time (mean of 50) and
// the error against the per-tensor result rescaled (outer-vector cases).
// Findings: bench/fp8/BASELINE.md.
//
//   nvcc -O2 -std=c++17 -arch=sm_90a scale_modes_probe.cu -lcublasLt \
//     -o scale-modes-probe
#include <cmath>
#include <cstdio>
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <vector>
#define CK(x)                                                                  \
  do {                                                                         \
    auto r_ = (x);                                                             \
    if (r_ != 0) {                                                             \
      std::printf("%s -> %d\n", #x, int(r_));                                  \
    }                                                                          \
  } while (0)
int main() {
  const int m = 3072, n = 4096, k = 1024;
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  void *A, *B, *D, *bias, *ws;
  float *sa, *sb, *sd;
  cudaMalloc(&A, size_t(m) * k);
  cudaMalloc(&B, size_t(n) * k);
  cudaMalloc(&D, size_t(m) * n * 2);
  cudaMalloc(&bias, m * 2);
  cudaMalloc(&ws, 32 << 20);
  cudaMalloc(&sa, m * 4);
  cudaMalloc(&sb, n * 4);
  cudaMalloc(&sd, 256);
  std::vector<unsigned char> ha(size_t(m) * k), hb(size_t(n) * k);
  for (size_t i = 0; i < ha.size(); ++i)
    ha[i] = __nv_cvt_float_to_fp8(float((i * 7919) % 17) / 8.f - 1.f,
                                  __NV_SATFINITE, __NV_E4M3);
  for (size_t i = 0; i < hb.size(); ++i)
    hb[i] = __nv_cvt_float_to_fp8(float((i * 104729) % 13) / 6.f - 1.f,
                                  __NV_SATFINITE, __NV_E4M3);
  cudaMemcpy(A, ha.data(), ha.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(B, hb.data(), hb.size(), cudaMemcpyHostToDevice);
  std::vector<float> hostScaleA(m), hostScaleB(n);
  for (int i = 0; i < m; ++i)
    hostScaleA[i] = 0.5f + (i % 5) * 0.25f;
  for (int i = 0; i < n; ++i)
    hostScaleB[i] = 1.0f + (i % 3);
  cudaMemcpy(sa, hostScaleA.data(), m * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(sb, hostScaleB.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemset(bias, 0, m * 2);
  float one = 1, zero = 0, dscale = 1;
  cudaMemcpy(sd, &dscale, 4, cudaMemcpyHostToDevice);
  struct Case {
    const char *name;
    int modeA, modeB;
    bool gelu;
    bool fp8d;
  };
  Case cases[] = {{"scalar/scalar", 0, 0, false, false},
                  {"outer/scalar", 3, 0, false, false},
                  {"outer/outer", 3, 3, false, false},
                  {"outer/outer gelu_bias", 3, 3, true, false},
                  {"outer/scalar gelu_bias", 3, 0, true, false},
                  {"outer/outer gelu_bias e4m3 D", 3, 3, true, true},
                  {"outer/scalar gelu_bias e4m3 D", 3, 0, true, true}};
  std::vector<__half> ref(size_t(m) * n);
  for (const Case &c : cases) {
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t,
                                   sizeof(t));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn,
                                   sizeof(nn));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                   &sa, sizeof(sa));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                   &sb, sizeof(sb));
    cublasLtMatmulMatrixScale_t ma = cublasLtMatmulMatrixScale_t(c.modeA),
                                mb = cublasLtMatmulMatrixScale_t(c.modeB);
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                                      &ma, sizeof(ma)));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                      &mb, sizeof(mb)));
    if (c.gelu) {
      cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_GELU_BIAS;
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e,
                                     sizeof(e));
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                     &bias, sizeof(bias));
      cudaDataType_t bt = CUDA_R_16F;
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                     &bt, sizeof(bt));
    }
    if (c.fp8d)
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER,
                                     &sd, sizeof(sd));
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n, k);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, m, n, m);
    cublasLtMatrixLayoutCreate(&ld, c.fp8d ? CUDA_R_8F_E4M3 : CUDA_R_16F, m, n,
                               m);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    size_t wsb = 32 << 20;
    cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb));
    cublasLtMatmulHeuristicResult_t h[4];
    int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld,
                                                       pref, 4, h, &found);
    if (hs != 0 || !found) {
      std::printf("%-32s heuristic status %d found %d\n", c.name, int(hs),
                  found);
      continue;
    }
    cublasStatus_t ms =
        cublasLtMatmul(lt, desc, &one, A, la, B, lb, &zero, nullptr, lc, D, ld,
                       &h[0].algo, ws, wsb, 0);
    cudaError_t e = cudaDeviceSynchronize();
    float us = 0;
    if (ms == 0) {
      cudaEvent_t a, b;
      cudaEventCreate(&a);
      cudaEventCreate(&b);
      cudaEventRecord(a);
      for (int i = 0; i < 50; ++i)
        cublasLtMatmul(lt, desc, &one, A, la, B, lb, &zero, nullptr, lc, D, ld,
                       &h[0].algo, ws, wsb, 0);
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      cudaEventElapsedTime(&us, a, b);
      us *= 1000.f / 50;
    }
    // check: D[i, j] should be sa[i] * sb[j] * dot (modes) relative to
    // scalar/scalar with sa[0], sb[0]
    double err = -1;
    if (ms == 0 && !c.fp8d && !c.gelu) {
      std::vector<__half> d(size_t(m) * n);
      cudaMemcpy(d.data(), D, d.size() * 2, cudaMemcpyDeviceToHost);
      if (c.modeA == 0 && c.modeB == 0)
        ref = d;
      else {
        double e2 = 0, r2 = 0;
        for (int j = 0; j < n; j += 37)
          for (int i = 0; i < m; i += 11) {
            double r = double(__half2float(ref[size_t(j) * m + i])) /
                       (hostScaleA[0] * hostScaleB[0]) * hostScaleA[i] *
                       (c.modeB ? hostScaleB[j] : hostScaleB[0]);
            double g = __half2float(d[size_t(j) * m + i]);
            e2 += (g - r) * (g - r);
            r2 += r * r;
          }
        err = std::sqrt(e2 / r2);
      }
    }
    std::printf("%-32s heuristic found %d, matmul status %d (%s), %.1f us, rel "
                "err vs scaled reference %.2e\n",
                c.name, found, int(ms), cudaGetErrorString(e), us, err);
  }
  return 0;
}
