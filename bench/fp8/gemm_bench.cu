// bench/fp8/gemm_bench.cu — cuBLASLt FP8 (E4M3, per-tensor scales, fp32
// accumulation, fp16 out) against the fp16 GEMM the runtime runs today, on
// the flow transformers' linear shapes, plus the cost of quantizing the
// activation (amax reduction + scale + E4M3 conversion) that a dynamic
// per-tensor W8A8 path adds before each GEMM. Prints one line per shape:
//   m n k  fp16_us  fp8_us  fp8_fastaccum_us  quantize_us  tflops16 tflops8
// m = output features, n = tokens (rows of the activation), k = input
// features; D[m, n] (column-major) = W[m, k] · X[k, n] as the runtime's
// buildGemm lays linears out (TRANSA = T: PyTorch's [out, in] weight).
//
// The quantization is the runtime's (runtime/kernels/fp8.cuh).
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -I<repo> gemm_bench.cu -lcublasLt -o gemm_bench
//   ./gemm_bench M N K [M N K ...]
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "bench/fp8/bench_timing.cuh"
#include "runtime/kernels/fp8.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

__global__ void fillHalf(__half *p, size_t n, unsigned seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2half(scale * (float(h & 0xffff) / 32768.f - 1.f));
  }
}

struct Gemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

Gemm makeGemm(cublasLtHandle_t lt, cudaDataType_t in, int m, int n, int k,
              const float *scaleA, const float *scaleB, bool fastAccum,
              size_t ws, const void *probeA, const void *probeB, void *probeD,
              void *probeWs) {
  Gemm g;
  CK(cublasLtMatmulDescCreate(&g.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t,
                                    sizeof(t)));
  CK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn,
                                    sizeof(nn)));
  if (in == CUDA_R_8F_E4M3) {
    CK(cublasLtMatmulDescSetAttribute(
        g.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scaleA, sizeof(scaleA)));
    CK(cublasLtMatmulDescSetAttribute(
        g.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scaleB, sizeof(scaleB)));
    int8_t fast = fastAccum;
    CK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                                      &fast, sizeof(fast)));
  }
  CK(cublasLtMatrixLayoutCreate(&g.a, in, k, m, k));
  CK(cublasLtMatrixLayoutCreate(&g.b, in, k, n, k));
  // BENCH_OUT=bf16|f32 tries another output type for the FP8 GEMM.
  cudaDataType_t out = CUDA_R_16F;
  if (const char *o = std::getenv("BENCH_OUT"); o && in != CUDA_R_16F)
    out = std::string(o) == "bf16" ? CUDA_R_16BF : CUDA_R_32F;
  CK(cublasLtMatrixLayoutCreate(&g.d, out, m, n, m));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  cublasLtMatmulHeuristicResult_t r[8] = {};
  int found = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(lt, g.desc, g.a, g.b, g.d, g.d, pref, 8, r,
                                    &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (!found) {
    std::fprintf(stderr, "no algorithm for %d %d %d\n", m, n, k);
    std::exit(1);
  }
  // The first candidate that runs (cuBLASLt 13.1 offers FP8 candidates that
  // then answer NOT_SUPPORTED on the H100).
  for (int i = 0; i < found; ++i) {
    g.algo = r[i].algo;
    const float alpha = 1.f, beta = 0.f;
    if (cublasLtMatmul(lt, g.desc, &alpha, probeA, g.a, probeB, g.b, &beta,
                       nullptr, g.d, probeD, g.d, &g.algo, probeWs, ws,
                       0) == CUBLAS_STATUS_SUCCESS) {
      if (i)
        std::fprintf(stderr, "(%d %d %d %s: candidate %d of %d runs)\n", m, n,
                     k, in == CUDA_R_16F ? "fp16" : "fp8", i, found);
      return g;
    }
  }
  std::fprintf(stderr, "none of the %d candidates runs for %d %d %d %s\n",
               found, m, n, k, in == CUDA_R_16F ? "fp16" : "fp8");
  g.desc = nullptr; // not runnable: timed as 0
  return g;
}


int main(int argc, char **argv) {
  if (argc < 4 || (argc - 1) % 3) {
    std::fprintf(stderr, "usage: gemm_bench M N K [M N K ...]\n");
    return 2;
  }
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  const size_t ws = size_t(32) << 20;
  void *workspace;
  CK(cudaMalloc(&workspace, ws));
  // amax, dequant(X), dequant(W), each in its own 256-byte slot (cuBLASLt
  // answers NOT_SUPPORTED for scale pointers that are only 4-byte aligned).
  constexpr int kSlot = 64;
  float *scales;
  CK(cudaMalloc(&scales, 3 * kSlot * sizeof(float)));
  const float one = 1.f;
  for (int i = 0; i < 3; ++i)
    CK(cudaMemcpy(scales + i * kSlot, &one, sizeof(one),
                  cudaMemcpyHostToDevice));
  std::printf("m n k fp16_us fp8_us fp8_fastaccum_us quantize_us "
              "tflops_fp16 tflops_fp8\n");
  for (int i = 1; i + 2 < argc; i += 3) {
    int m = std::atoi(argv[i]), n = std::atoi(argv[i + 1]),
        k = std::atoi(argv[i + 2]);
    __half *w16, *x16, *d16;
    __nv_fp8_e4m3 *w8, *x8;
    CK(cudaMalloc(&w16, size_t(m) * k * 2));
    CK(cudaMalloc(&x16, size_t(n) * k * 2));
    CK(cudaMalloc(&d16, size_t(m) * n * 4));
    CK(cudaMalloc(&w8, size_t(m) * k));
    CK(cudaMalloc(&x8, size_t(n) * k));
    fillHalf<<<1024, 256>>>(w16, size_t(m) * k, 1, 0.05f);
    fillHalf<<<1024, 256>>>(x16, size_t(n) * k, 2, 2.f);
    CK(cudaMemset(w8, 0x30, size_t(m) * k));
    CK(cudaMemset(x8, 0x30, size_t(n) * k));
    const float alpha = 1.f, beta = 0.f;
    Gemm g16 = makeGemm(lt, CUDA_R_16F, m, n, k, nullptr, nullptr, false, ws,
                        w16, x16, d16, workspace);
    Gemm g8 = makeGemm(lt, CUDA_R_8F_E4M3, m, n, k, scales + 2 * kSlot, scales + kSlot,
                       false, ws, w8, x8, d16, workspace);
    Gemm g8f = makeGemm(lt, CUDA_R_8F_E4M3, m, n, k, scales + 2 * kSlot, scales + kSlot,
                        true, ws, w8, x8, d16, workspace);
    // beta = 0: no C (nullptr, as NVIDIA's FP8 sample passes it).
    auto run = [&](const Gemm &g, const void *a, const void *b) {
      cublasStatus_t st =
          cublasLtMatmul(lt, g.desc, &alpha, a, g.a, b, g.b, &beta, nullptr,
                         g.d, d16, g.d, &g.algo, workspace, ws, 0);
      if (st != CUBLAS_STATUS_SUCCESS) {
        std::fprintf(stderr, "cublasLtMatmul (%s, %d %d %d) failed: %d\n",
                     &g == &g16 ? "fp16" : "fp8", m, n, k, int(st));
        std::exit(1);
      }
    };
    constexpr int kReps = 50, kWarmup = 10;
    float t16 = medianUs([&] { run(g16, w16, x16); }, kReps, kWarmup);
    float t8 = g8.desc ? medianUs([&] { run(g8, w8, x8); }, kReps, kWarmup)
                       : 0.f;
    float t8f =
        g8f.desc ? medianUs([&] { run(g8f, w8, x8); }, kReps, kWarmup) : 0.f;
    const size_t elems = size_t(n) * k;
    float tq = medianUs([&] {
      cudaMemsetAsync(scales, 0, sizeof(float));
      trellis_fp8_amax_f16<<<1056, 256>>>(x16, elems, scales, nullptr);
      trellis_fp8_quantize_f16<<<1056, 256>>>(x16, elems, scales, x8,
                                                 scales + kSlot);
    }, kReps, kWarmup);
    const double flop = 2.0 * m * n * k;
    std::printf("%d %d %d %.1f %.1f %.1f %.1f %.0f %.0f\n", m, n, k, t16, t8,
                t8f, tq, flop / t16 * 1e-6, t8 > 0 ? flop / t8 * 1e-6 : 0.0);
    cudaFree(w16);
    cudaFree(x16);
    cudaFree(d16);
    cudaFree(w8);
    cudaFree(x8);
  }
  return 0;
}
