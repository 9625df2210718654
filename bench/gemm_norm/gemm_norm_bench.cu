// The fused GEMM + residual + LayerNorm kernel (runtime/kernels/
// gemm_norm_sm90.cuh) alone, at the SS flow's shapes: checked against an
// independent path (an fp32 CUDA-core GEMM, rounded to fp16 with the bias,
// then the row kernel trellis_residual_norm_rows) and timed against cuBLAS's
// GEMM of the same shape (what the stage ran before, without its row kernel).
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -o gemm_norm_bench gemm_norm_bench.cu \
//        -lcuda -lcublas      (bench/gemm_norm/build.sh)
//   ./gemm_norm_bench [reps]
// Prints one table row per case: max |fused - reference| of both outputs (in
// fp16 ulps of the values), the median time of the fused kernel, of cuBLAS's
// GEMM alone, and of the fallback path (cuBLAS GEMM + row kernel).
#include "runtime/kernels/gemm_norm_sm90.cuh"
#include "runtime/kernels/residual_norm.cuh"

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

TRELLIS_GEMM_NORM_SM90_DEFINE(1024)
TRELLIS_RESIDUAL_NORM_DEFINE()

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,           \
                   cudaGetErrorString(e));                                     \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

// Reference GEMM: fp32 accumulate on CUDA cores, h = fp16(acc + bias).
__global__ void refGemm(const __half *a, const __half *w, const __half *bias,
                        __half *h, int rows, int n, int k) {
  __shared__ float As[16][65], Ws[16][65];
  const int tr = threadIdx.y, tc = threadIdx.x; // 16 x 16
  const int r = blockIdx.y * 16 + tr, c = blockIdx.x * 16 + tc;
  float acc = 0.f;
  for (int k0 = 0; k0 < k; k0 += 64) {
    for (int i = tc; i < 64; i += 16) {
      As[tr][i] = __half2float(a[int64_t(blockIdx.y * 16 + tr) * k + k0 + i]);
      Ws[tr][i] = __half2float(w[int64_t(blockIdx.x * 16 + tr) * k + k0 + i]);
    }
    __syncthreads();
    for (int i = 0; i < 64; ++i)
      acc += As[tr][i] * Ws[tc][i];
    __syncthreads();
  }
  h[int64_t(r) * n + c] = __float2half_rn(acc + __half2float(bias[c]));
}

__global__ void emptyKernel() {}

static CUtensorMap tensorMap(const void *ptr, int64_t rows, int64_t k,
                             int boxRows) {
  CUtensorMap m;
  cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)};
  cuuint64_t strides[1] = {cuuint64_t(k) * 2};
  cuuint32_t box[2] = {TRELLIS_GEMM_NORM_BK, cuuint32_t(boxRows)};
  cuuint32_t elem[2] = {1, 1};
  CUresult r = cuTensorMapEncodeTiled(
      &m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<void *>(ptr), dims,
      strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", int(r));
    std::exit(1);
  }
  return m;
}

static std::vector<__half> randomHalves(size_t n, float scale, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<__half> v(n);
  for (auto &x : v)
    x = __float2half(d(g));
  return v;
}
template <class T> static T *upload(const std::vector<T> &v) {
  T *p;
  CK(cudaMalloc(&p, v.size() * sizeof(T)));
  CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

template <class F> static float medianMs(F &&f, int reps) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  // Warm-up: enough launches for the clocks to leave idle (~20 ms at 200
  // reps; fewer under compute-sanitizer, which runs with reps = 1).
  for (int i = 0; i < std::min(200, 4 * reps); ++i)
    f();
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(e0));
    f();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Case {
  const char *name;
  int rows, k;
  bool gate, plus, modulate, affine;
  bool concurrent = false; ///< also time two launches on two streams
};

int main(int argc, char **argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 50;
  const bool diag = argc > 2; // any second argument: print mismatches
  const int N = 1024;
  cuInit(0);
  cublasHandle_t blas;
  cublasCreate(&blas);
  auto kernel = trellis_gemm_norm_sm90_n1024;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          TRELLIS_GEMM_NORM_SMEM));
  const Case cases[] = {
      {"k = 256 (four k steps), residual + LN", 256, 256, false, false, false,
       false},
      {"k = 512, residual + LN", 256, 512, false, false, false, false},
      {"k = 256, 4096 rows (epilogue cost)", 4096, 256, true, false, true,
       false},
      {"k = 2048, 4096 rows", 4096, 2048, true, false, true, false},
      {"attn out + gated residual + LN affine", 4096, 1024, true, false, false,
       true, true},
      {"cross out + residual + LN modulate", 4096, 1024, false, false, true,
       false},
      {"MLP down + gated residual + LN modulate", 4096, 4096, true, false, true,
       false, true},
      {"attn out + gate + plus + LN modulate", 4096, 1024, true, true, true,
       false},
      {"MLP down, 2 samples x 4096 rows", 8192, 4096, true, false, true, false},
      {"ragged rows 4000 (masked tail)", 4000, 1024, true, false, false, false},
      {"3840 rows (30 clusters)", 3840, 1024, true, false, true, false},
      {"3584 rows (28 clusters)", 3584, 1024, true, false, true, false},
      {"3840 rows (30 clusters), k = 4096", 3840, 4096, true, false, true,
       false},
  };
  {
    // How many 4-CTA clusters of this kernel the GPU holds at once: a grid
    // of 4096 rows needs 32 (one 128-row block each).
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(N / TRELLIS_GEMM_NORM_BN, 32);
    cfg.blockDim = dim3(TRELLIS_GEMM_NORM_THREADS);
    cfg.dynamicSmemBytes = TRELLIS_GEMM_NORM_SMEM;
    int clusters = 0;
    CK(cudaOccupancyMaxActiveClusters(&clusters, (void *)kernel, &cfg));
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    std::printf("co-resident clusters of %d CTAs: %d (%d SMs; 4096 rows need "
                "32)\n",
                N / TRELLIS_GEMM_NORM_BN, clusters, sms);
  }
  std::printf("timing floor (an empty kernel between two events): %.4f ms\n\n",
              medianMs([] { emptyKernel<<<1, 32>>>(); }, reps));
  std::printf("| case | rows | k | max err residual (ulp at row rms) | max err "
              "out (ulp at row rms) "
              "| fused ms | TFLOP/s | cuBLAS GEMM ms | TFLOP/s | GEMM + row "
              "kernel ms |\n|---|---|---|---|---|---|---|---|---|---|\n");
  int failures = 0;
  for (const Case &cs : cases) {
    const int rows = cs.rows, K = cs.k;
    const int tokens = cs.rows == 8192 ? 4096 : (rows + 127) / 128 * 128;
    const int samples = (rows + tokens - 1) / tokens;
    auto hA = randomHalves(size_t(rows) * K, 1.f, 1);
    auto hW = randomHalves(size_t(N) * K, 1.f / std::sqrt(float(K)), 2);
    auto hB = randomHalves(N, 0.1f, 3);
    auto hX = randomHalves(size_t(rows) * N, 2.f, 4);
    auto hG = randomHalves(size_t(samples) * N, 0.5f, 5);
    auto hP = randomHalves(size_t(samples) * N, 0.5f, 6);
    auto hSh = randomHalves(size_t(samples) * N, 0.3f, 7);
    auto hSc = randomHalves(size_t(samples) * N, 0.3f, 8);
    std::vector<float> hNw(N), hNb(N);
    for (int i = 0; i < N; ++i) {
      hNw[i] = 1.f + 0.01f * float(i % 17);
      hNb[i] = 0.02f * float(i % 5) - 0.04f;
    }
    __half *a = upload(hA), *w = upload(hW), *bias = upload(hB),
           *x = upload(hX), *gate = upload(hG), *plus = upload(hP),
           *shift = upload(hSh), *scale = upload(hSc);
    float *nw = upload(hNw), *nb = upload(hNb);
    __half *res, *out, *h, *refRes, *refOut;
    for (__half **p : {&res, &out, &h, &refRes, &refOut})
      CK(cudaMalloc(p, size_t(rows) * N * 2));

    TrellisGemmNormParams p{};
    p.bias = bias;
    p.x = x;
    p.residual_out = res;
    p.out = out;
    p.gate = cs.gate ? gate : nullptr;
    p.plus = cs.plus ? plus : nullptr;
    p.shift = cs.modulate ? shift : nullptr;
    p.scale = cs.modulate ? scale : nullptr;
    p.norm_weight = cs.affine ? nw : nullptr;
    p.norm_bias = cs.affine ? nb : nullptr;
    p.rows = rows;
    p.tokens = tokens;
    p.n = N;
    p.k = K;
    p.eps = 1e-6f;
    const CUtensorMap mA = tensorMap(a, rows, K, TRELLIS_GEMM_NORM_BM);
    const CUtensorMap mW = tensorMap(w, N, K, TRELLIS_GEMM_NORM_BN);
    const CUtensorMap mX = tensorMap(x, rows, N, TRELLIS_GEMM_NORM_BM);
    const dim3 grid(N / TRELLIS_GEMM_NORM_BN,
                    (rows + TRELLIS_GEMM_NORM_BM - 1) / TRELLIS_GEMM_NORM_BM);
    auto fused = [&] {
      kernel<<<grid, TRELLIS_GEMM_NORM_THREADS, TRELLIS_GEMM_NORM_SMEM>>>(
          mA, mW, mX, p);
    };
    // Reference: fp32 CUDA-core GEMM, then the row kernel.
    refGemm<<<dim3(N / 16, rows / 16), dim3(16, 16)>>>(a, w, bias, h, rows, N,
                                                       K);
    TrellisGemmNormParams q = p;
    q.h = h;
    q.residual_out = refRes;
    q.out = refOut;
    auto rowKernel = [&](const TrellisGemmNormParams &pp) {
      trellis_residual_norm_rows<<<(rows + 3) / 4,
                                   TRELLIS_RESIDUAL_NORM_THREADS>>>(pp);
    };
    rowKernel(q);
    fused();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<__half> r1(size_t(rows) * N), r2(r1.size()), o1(r1.size()),
        o2(r1.size());
    CK(cudaMemcpy(r1.data(), res, r1.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(r2.data(), refRes, r1.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(o1.data(), out, r1.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(o2.data(), refOut, r1.size() * 2, cudaMemcpyDeviceToHost));
    // Max |fused - reference| in units of the fp16 spacing at the reference
    // value's row scale (the rms of the row: values near zero carry the
    // rounding of larger operands), and whether any value is not finite.
    auto err = [&](const std::vector<__half> &u, const std::vector<__half> &v) {
      double worst = 0;
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int c = 0; c < N; ++c) {
          const double b = __half2float(v[size_t(r) * N + c]);
          ss += b * b;
        }
        const float scale = float(std::sqrt(ss / N)) + 1e-3f;
        const float spacing = std::ldexp(1.f, std::ilogb(scale) - 10);
        for (int c = 0; c < N; ++c) {
          const float a = __half2float(u[size_t(r) * N + c]),
                      b = __half2float(v[size_t(r) * N + c]);
          if (!std::isfinite(a))
            return 1e30;
          worst = std::max(worst, double(std::fabs(a - b) / spacing));
        }
      }
      return worst;
    };
    const double eRes = err(r1, r2), eOut = err(o1, o2);
    if (diag) {
      // Where the residuals differ: the first mismatches and their count.
      int64_t bad = 0;
      for (size_t i = 0; i < r1.size(); ++i) {
        const float u = __half2float(r1[i]), v = __half2float(r2[i]);
        if (std::fabs(u - v) > 0.01f * std::fabs(v) + 0.01f) {
          if (bad < 12)
            std::printf("  mismatch row %zu col %zu: fused %g reference %g\n",
                        i / N, i % N, u, v);
          ++bad;
        }
      }
      std::printf("  %lld of %zu residual values differ\n", (long long)bad,
                  r1.size());
    }
    // Different k orders round h differently now and then (one ulp of h,
    // scaled by the gate), and the norm's statistics are summed in another
    // order: a few ulps at the row's scale; a wrong element is hundreds.
    if (!(eRes <= 4 && eOut <= 8))
      ++failures;

    const float tFused = medianMs(fused, reps);
    const float one = 1.f, zero = 0.f;
    auto gemm = [&] {
      cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, N, rows, K, &one, w,
                   CUDA_R_16F, K, a, CUDA_R_16F, K, &zero, h, CUDA_R_16F, N,
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    const float tGemm = medianMs(gemm, reps);
    const float tBoth = medianMs(
        [&] {
          gemm();
          rowKernel(q);
        },
        reps);
    if (cs.concurrent) {
      // Two branches at once (a guided step's conditional and unconditional
      // forwards run on two streams): each path launched on two streams.
      cudaStream_t st[2];
      cudaEvent_t fork, join;
      for (auto &x : st)
        CK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
      CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
      CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
      auto twice = [&](auto &&launch) {
        CK(cudaEventRecord(fork, 0));
        for (int b = 0; b < 2; ++b) {
          CK(cudaStreamWaitEvent(st[b], fork));
          launch(st[b]);
          CK(cudaEventRecord(join, st[b]));
          CK(cudaStreamWaitEvent(0, join));
        }
      };
      const float t2Fused = medianMs(
          [&] {
            twice([&](cudaStream_t s) {
              kernel<<<grid, TRELLIS_GEMM_NORM_THREADS, TRELLIS_GEMM_NORM_SMEM,
                       s>>>(mA, mW, mX, p);
            });
          },
          reps);
      const float t2Both = medianMs(
          [&] {
            twice([&](cudaStream_t s) {
              cublasSetStream(blas, s);
              gemm();
              trellis_residual_norm_rows<<<
                  (rows + 3) / 4, TRELLIS_RESIDUAL_NORM_THREADS, 0, s>>>(q);
            });
          },
          reps);
      cublasSetStream(blas, 0);
      std::printf("| %s: two streams at once | %d | %d | | | %.4f | | | | "
                  "%.4f |\n",
                  cs.name, rows, K, t2Fused, t2Both);
    }
    const double flop = 2.0 * rows * double(N) * K;
    std::printf("| %s | %d | %d | %.1f | %.1f | %.4f | %.0f | %.4f | %.0f | "
                "%.4f |\n",
                cs.name, rows, K, eRes, eOut, tFused, flop / tFused * 1e-9,
                tGemm, flop / tGemm * 1e-9, tBoth);
    for (void *ptr :
         {(void *)a, (void *)w, (void *)bias, (void *)x, (void *)gate,
          (void *)plus, (void *)shift, (void *)scale, (void *)nw, (void *)nb,
          (void *)res, (void *)out, (void *)h, (void *)refRes, (void *)refOut})
      CK(cudaFree(ptr));
  }
  std::printf("%s: %d case(s) outside the error bound\n",
              failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
