// bench/fp8/bench_timing.cuh — what gemm_bench.cu, epilogue_probe.cu and
// algo_search.cu share: a fatal check of a CUDA / cuBLASLt status, and the median time of a
// launch (CUDA events around each call, after warm-up calls).
#ifndef TRELLIS_BENCH_FP8_BENCH_TIMING_CUH
#define TRELLIS_BENCH_FP8_BENCH_TIMING_CUH

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                  \
  do {                                                                         \
    auto ck_ = (x);                                                            \
    if (ck_ != 0) {                                                            \
      std::fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x,  \
                   int(ck_));                                                  \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

/// The median of `reps` timed calls of `f` (µs), after `warmup` untimed ones.
template <class F> float medianUs(F f, int reps, int warmup) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < warmup; ++i)
    f();
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(e0);
    f();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    t.push_back(ms * 1000.f);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

#endif // TRELLIS_BENCH_FP8_BENCH_TIMING_CUH
