// Portable attention kernels (mma.sync). Built twice as PTX:
//   nvcc -ptx -arch=compute_80                              -> sm80
//   configurations (cp.async, m16n8k16) nvcc -ptx -arch=compute_75
//   -DTRELLIS_ATTN_TARGET_SM75   -> sm75 configurations (sync loads, m16n8k8)
// The driver JIT-compiles the PTX for the GPU it runs on (any later
// architecture too).
#include "runtime/kernels/attention_sm80.cuh"
#include "runtime/kernels/flexicubes.cuh"
#include "runtime/kernels/head_rmsnorm.cuh"
#include "runtime/kernels/sparse.cuh"

#define TRELLIS_ATTN_DEFINE_SM80(D, BM, BN, ST, MB)                            \
  extern "C" __global__ void __launch_bounds__((BM)*2, MB)                     \
      trellis_attn_sm80_d##D##_m##BM##_n##BN##_s##ST(                          \
          const __grid_constant__ TrellisAttnParams p) {                       \
    trellis_attn::attn_fwd_sm80<D, BM, BN, ST>(p);                             \
  }
#define TRELLIS_ATTN_DEFINE_SM75(D, BM, BN, ST, MB)                            \
  extern "C" __global__ void __launch_bounds__((BM)*2, MB)                     \
      trellis_attn_sm75_d##D##_m##BM##_n##BN##_s##ST(                          \
          const __grid_constant__ TrellisAttnParams p) {                       \
    trellis_attn::attn_fwd_sm80<D, BM, BN, ST>(p);                             \
  }

#ifdef TRELLIS_ATTN_TARGET_SM75
TRELLIS_ATTN_SM75_CONFIGS(TRELLIS_ATTN_DEFINE_SM75)
#else
TRELLIS_ATTN_SM80_CONFIGS(TRELLIS_ATTN_DEFINE_SM80)
#endif

TRELLIS_HEAD_RMSNORM_DEFINE(64)
TRELLIS_HEAD_RMSNORM_DEFINE(80)
TRELLIS_HEAD_RMSNORM_DEFINE(128)
