// The K loop of a warp-specialized GEMM tile on Hopper (sm_90a), shared by
// gemm_norm_sm90.cuh and bench/fp8/sm90_fp8_gemm.cuh: STAGES stages of
// `kStageBytes` at `base` (one k step's A and B tiles each), filled by one
// producer thread's TMA loads and read by the consumer warpgroups' wgmma.
//   full[s]   one arrival (the producer's expect_tx) + the stage's bytes
//   empty[s]  one arrival per consumer warp once its wgmma read the stage
// Use u of stage s completes phase u of full[s] and of empty[s].
#pragma once

#include "runtime/kernels/attention_sm90.cuh"

namespace trellis_gemm {

using namespace trellis_attn;

template <int STAGES, int CONSUMER_WARPS> struct TmaWgmmaRing {
  uint32_t base, stageBytes, bars;

  __device__ uint32_t stage(int s) const { return base + s * stageBytes; }
  __device__ uint32_t full(int s) const { return bars + 8 * s; }
  __device__ uint32_t empty(int s) const { return bars + 8 * (STAGES + s); }

  // Thread 0 initializes the barriers; every thread must then reach a
  // __syncthreads before using them.
  __device__ __forceinline__ void init() const {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), CONSUMER_WARPS);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }

  // The producer thread: for each k step kt, once the consumers gave its
  // stage back, load(kt, stage address, full barrier) issues the TMA loads of
  // exactly stageBytes.
  template <class Load>
  __device__ __forceinline__ void produce(int ksteps, Load &&load) const {
    for (int kt = 0; kt < ksteps; ++kt) {
      const int s = kt % STAGES;
      if (kt >= STAGES)
        mbar_wait(empty(s), ((kt / STAGES) - 1) & 1);
      mbar_expect_tx(full(s), stageBytes);
      load(kt, stage(s), full(s));
    }
  }

  // A consumer warpgroup: for each k step, once its stage is full,
  // mma(stage offset in 16-byte units, for the wgmma descriptors) issues the
  // step's wgmma; the stage of the step before goes back once they are done.
  // Returns with every wgmma complete.
  template <class Mma>
  __device__ __forceinline__ void consume(int ksteps, int lane,
                                          Mma &&mma) const {
    for (int kt = 0; kt < ksteps; ++kt) {
      const int s = kt % STAGES;
      mbar_wait(full(s), (kt / STAGES) & 1);
      wgmma_fence();
      mma(uint64_t((s * stageBytes) >> 4));
      wgmma_commit();
      wgmma_wait<1>();
      if (kt > 0 && lane == 0)
        mbar_arrive(empty((kt - 1) % STAGES));
    }
    wgmma_wait<0>();
  }
};

} // namespace trellis_gemm
