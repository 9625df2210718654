// A first FP8 GEMM of our own (sm90_fp8_gemm.cuh: TMA, warp-specialized,
// wgmma from shared memory) against cuBLASLt's at the flow linears' shapes,
// in one process: each result against an fp32 CUDA-core GEMM of the same
// E4M3 values, and CUDA-event medians after warm-up.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I. \
//        bench/fp8/gemm_fp8_probe.cu -lcublasLt -lcuda -o gemm-fp8-probe
//   ./gemm-fp8-probe [M N K] ...
//
// Prints each result's largest error relative to the largest |reference|
// (fp16's rounding is ~5e-4; cuBLASLt promotes its FP8 partial sums to fp32,
// ours does not, which costs accuracy at K = 4096). Exit 1 when an error
// exceeds 1e-2 or a value is not finite: a wrong result, not rounding.
#include "bench/fp8/lt_matmul.cuh"
#include "bench/fp8/sm90_fp8_gemm.cuh"

#include <cuda.h>
#include <cuda_fp8.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

TRELLIS_GEMM_FP8_SM90_DEFINE(256, 4)
TRELLIS_GEMM_FP8_SM90_DEFINE(128, 6)

namespace {

/// out[r, c] = s sum_k x[r, k] w[c, k] + bias[c] in fp32 (one thread each).
__global__ void referenceGemm(const __nv_fp8_e4m3 *x, const __nv_fp8_e4m3 *w,
                              const __half *bias, float s, int m, int n, int k,
                              float *out) {
  const int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= int64_t(m) * n)
    return;
  const int r = int(g / n), c = int(g % n);
  float acc = 0.f;
  for (int i = 0; i < k; ++i)
    acc = fmaf(float(x[int64_t(r) * k + i]), float(w[int64_t(c) * k + i]), acc);
  out[g] = acc * s + __half2float(bias[c]);
}

CUtensorMap tensorMap(const void *ptr, int rows, int k, int boxRows) {
  CUtensorMap map;
  cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)};
  cuuint64_t strides[1] = {cuuint64_t(k)};
  cuuint32_t box[2] = {TRELLIS_GEMM_FP8_BK, cuuint32_t(boxRows)};
  cuuint32_t elem[2] = {1, 1};
  CK(cuTensorMapEncodeTiled(
      &map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void *>(ptr), dims,
      strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

std::vector<__nv_fp8_e4m3> randomE4m3(size_t n, float sigma, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, sigma);
  std::vector<__nv_fp8_e4m3> v(n);
  for (auto &e : v)
    e = __nv_fp8_e4m3(d(g));
  return v;
}

template <class T> T *upload(const std::vector<T> &v) {
  T *p;
  CK(cudaMalloc(&p, v.size() * sizeof(T)));
  CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

/// max |out - ref| / max |ref| over an fp16 result.
double relError(const __half *dOut, const float *dRef, size_t n) {
  std::vector<__half> o(n);
  std::vector<float> r(n);
  CK(cudaMemcpy(o.data(), dOut, n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.data(), dRef, n * 4, cudaMemcpyDeviceToHost));
  double err = 0, mx = 0;
  for (size_t i = 0; i < n; ++i) {
    const double v = __half2float(o[i]);
    if (!std::isfinite(v))
      return INFINITY;
    err = std::max(err, std::fabs(v - r[i]));
    mx = std::max(mx, std::fabs(double(r[i])));
  }
  return err / mx;
}

struct OwnKernel {
  const char *name;
  void (*fn)(CUtensorMap, CUtensorMap, TrellisGemmFp8Params);
  int bn, stages;
};

int runShape(cublasLtHandle_t lt, int m, int n, int k, int reps) {
  std::printf("== m %d (tokens) x n %d (outputs) x k %d, bias, fp16 out: "
              "%.2f GFLOP\n",
              m, n, k, 2.0 * m * n * k * 1e-9);
  const auto hx = randomE4m3(size_t(m) * k, 1.f, 1);
  const auto hw = randomE4m3(size_t(n) * k, 1.f, 2);
  std::vector<__half> hb(n);
  std::mt19937 g(3);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto &b : hb)
    b = __float2half(d(g));
  auto *x = upload(hx);
  auto *w = upload(hw);
  auto *bias = upload(hb);
  float *scales, *ref;
  __half *out;
  CK(cudaMalloc(&scales, 512));
  const float sx = 0.5f, sw = 0.03125f;
  CK(cudaMemcpy(scales, &sx, 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(scales + 64, &sw, 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&ref, size_t(m) * n * 4));
  CK(cudaMalloc(&out, size_t(m) * n * 2));
  referenceGemm<<<unsigned((int64_t(m) * n + 255) / 256), 256>>>(
      x, w, bias, sx * sw, m, n, k, ref);
  CK(cudaGetLastError());

  bool ok = true;
  // cuBLASLt, as the runtime calls it: D [outputs, tokens] = W^T X.
  LtMatmul mm(n, m, k, CUDA_R_8F_E4M3, CUBLASLT_EPILOGUE_BIAS, CUDA_R_16F,
              scales + 64, scales, scales + 128, bias);
  void *workspace;
  const size_t workspaceBytes = size_t(32) << 20;
  CK(cudaMalloc(&workspace, workspaceBytes));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
      sizeof(workspaceBytes)));
  cublasLtMatmulHeuristicResult_t heur[8];
  int found = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(lt, mm.desc, mm.la, mm.lb, mm.lc, mm.ld,
                                    pref, 8, heur, &found));
  float best = INFINITY;
  for (int i = 0; i < found; ++i) {
    auto call = [&] {
      CK(mm.run(lt, heur[i].algo, w, x, out, workspace, workspaceBytes));
    };
    call();
    CK(cudaDeviceSynchronize());
    const double e = relError(out, ref, size_t(m) * n);
    const float t = medianUs(call, reps, reps);
    best = std::min(best, t);
    std::printf(
        "  cuBLASLt algo %d          %8.1f us  %6.0f TFLOP/s  err %.1e%s\n", i,
        t, 2.0 * m * n * k / t * 1e-6, e, e < 1e-2 ? "" : "  FAIL");
    ok &= e < 1e-2;
  }

  const OwnKernel kernels[] = {
      {"own n256 s4", trellis_gemm_fp8_sm90_n256_s4, 256, 4},
      {"own n128 s6", trellis_gemm_fp8_sm90_n128_s6, 128, 6}};
  for (const OwnKernel &kf : kernels) {
    if (n % kf.bn || k % TRELLIS_GEMM_FP8_BK)
      continue;
    const int smem = TRELLIS_GEMM_FP8_SMEM(kf.bn, kf.stages);
    CK(cudaFuncSetAttribute(kf.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            smem));
    const CUtensorMap mapX = tensorMap(x, m, k, TRELLIS_GEMM_FP8_BM);
    const CUtensorMap mapW = tensorMap(w, n, k, kf.bn);
    TrellisGemmFp8Params p{};
    p.scale_x = scales;
    p.scale_w = scales + 64;
    p.bias = bias;
    p.out = out;
    p.m = m;
    p.n = n;
    p.k = k;
    const dim3 grid(n / kf.bn,
                    (m + TRELLIS_GEMM_FP8_BM - 1) / TRELLIS_GEMM_FP8_BM);
    auto call = [&] {
      kf.fn<<<grid, TRELLIS_GEMM_FP8_THREADS, smem>>>(mapX, mapW, p);
    };
    CK(cudaMemset(out, 0xff, size_t(m) * n * 2));
    call();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    const double e = relError(out, ref, size_t(m) * n);
    const float t = medianUs(call, reps, reps);
    std::printf("  %-24s %8.1f us  %6.0f TFLOP/s  err %.1e  %.2fx cuBLASLt's "
                "best%s\n",
                kf.name, t, 2.0 * m * n * k / t * 1e-6, e, best / t,
                e < 1e-2 ? "" : "  FAIL");
    ok &= e < 1e-2;
  }
  cudaFree(x), cudaFree(w), cudaFree(bias), cudaFree(scales), cudaFree(ref);
  cudaFree(out), cudaFree(workspace);
  cublasLtMatmulPreferenceDestroy(pref);
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s\n", prop.name);
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  std::vector<std::array<int, 3>> shapes;
  for (int i = 1; i + 2 < argc; i += 3)
    shapes.push_back(
        {std::atoi(argv[i]), std::atoi(argv[i + 1]), std::atoi(argv[i + 2])});
  if (shapes.empty()) // the SS flow's linears (4096 tokens)
    shapes = {{4096, 1024, 1024},
              {4096, 3072, 1024},
              {4096, 4096, 1024},
              {4096, 1024, 4096}};
  int rc = 0;
  for (auto [m, n, k] : shapes)
    rc |= runShape(lt, m, n, k, 100);
  std::printf(rc ? "FAIL\n" : "all results within bounds\n");
  return rc;
}
