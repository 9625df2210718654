// sm_90a attention kernels (wgmma). Build: nvcc -cubin
// -gencode=arch=compute_90a,code=sm_90a (see bench/attention/build.sh). One
// extern "C" entry point per configuration listed in TRELLIS_ATTN_SM90_CONFIGS
// (attention.h); names follow TRELLIS_ATTN_NAME_SM90.
#include "runtime/kernels/attention_fp8_sm90.cuh"
#include "runtime/kernels/attention_sm90.cuh"
#include "runtime/kernels/flexicubes.cuh"
#include "runtime/kernels/fp8.cuh"
#include "runtime/kernels/head_rmsnorm.cuh"
#include "runtime/kernels/sparse.cuh"
#include "runtime/kernels/sparse_conv_sm90.cuh"

#define TRELLIS_ATTN_DEFINE_SM90(D, BM, BN, ST, MB, VAR, SUF)                  \
  extern "C" __global__ void __launch_bounds__((BM)*2, MB)                     \
      trellis_attn_sm90_d##D##_m##BM##_n##BN##_s##ST##SUF(                     \
          const __grid_constant__ TrellisAttnParams p) {                       \
    trellis_attn::attn_fwd_sm90<D, BM, BN, ST, MB, VAR>(p);                    \
  }

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error                                                                         \
    "attention_sm90a.cu must be compiled for sm_90a (-gencode=arch=compute_90a,code=sm_90a)"
#endif

TRELLIS_ATTN_SM90_CONFIGS(TRELLIS_ATTN_DEFINE_SM90)
// FP8 self-attention (attention_fp8_sm90.cuh): its two pre-pass kernels and
// the tile shapes of the d64 kernels above.
TRELLIS_ATTN_FP8_PREPARE_DEFINE()
TRELLIS_ATTN_FP8_DEFINE(256, 64, 4)
TRELLIS_ATTN_FP8_DEFINE(192, 128, 3)
TRELLIS_HEAD_RMSNORM_DEFINE(64)
TRELLIS_HEAD_RMSNORM_DEFINE(80)
TRELLIS_HEAD_RMSNORM_DEFINE(128)
// Implicit-GEMM sparse convs: 32-channel chunks (any Cin multiple of 32) and
// 64-channel chunks (Cin a multiple of 64), per output-channel tile (32: the
// tiny preset's convs, so that --gpu-check-ops covers the kernel).
TRELLIS_SPARSE_CONV_SM90_DEFINE(128, 32, 32, 4)
TRELLIS_SPARSE_CONV_SM90_DEFINE(128, 32, 64, 3)
TRELLIS_SPARSE_CONV_SM90_DEFINE(128, 64, 32, 4)
TRELLIS_SPARSE_CONV_SM90_DEFINE(128, 96, 32, 4)
TRELLIS_SPARSE_CONV_SM90_DEFINE(128, 128, 32, 4)
TRELLIS_SPARSE_CONV_SM90_DEFINE(128, 192, 32, 4)
TRELLIS_SPARSE_CONV_SM90_DEFINE(128, 64, 64, 3)
TRELLIS_SPARSE_CONV_SM90_DEFINE(128, 96, 64, 3)
TRELLIS_SPARSE_CONV_SM90_DEFINE(128, 128, 64, 3)
TRELLIS_SPARSE_CONV_SM90_DEFINE(128, 192, 64, 3)
