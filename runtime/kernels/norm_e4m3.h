/* The parameters of the E4M3 norm kernels (norm_e4m3.cuh), passed by value
 * as their only parameter; a plain C header for the runtime's host side
 * (runtime/cuda/Fp8Gemm.cpp). Kernels: trellis_norm_e4m3_v{1,2,4,8} for
 * rows of n <= 256 · VEC columns, TRELLIS_NORM_E4M3_THREADS threads a block,
 * one warp per row. */
#ifndef TRELLIS_RUNTIME_KERNELS_NORM_E4M3_H
#define TRELLIS_RUNTIME_KERNELS_NORM_E4M3_H

#include <stdint.h>

#define TRELLIS_NORM_E4M3_THREADS 256

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TrellisNormE4M3Params {
  /* f16 [rows, n] x and h; f16 gate, plus, shift, scale (null: absent; h
   * null: the norm of x itself, layer_norm_modulate) */
  const void *x, *h, *gate, *plus, *shift, *scale;
  const float *weight, *bias; /* affine LayerNorm: f32 [n] */
  void *residual_out;         /* f16 [rows, n]; null: not written */
  void *out;                  /* E4M3 [rows, n] */
  int64_t rows, n;            /* n a multiple of 8 */
  /* Rows per vector row of gate / plus / shift and scale: the tokens of a
   * sample for a per-sample [B, n] vector, 1 for an x-shaped one. */
  int64_t gate_rows, plus_rows, mod_rows;
  float eps, quantize;
} TrellisNormE4M3Params;

#ifdef __cplusplus
}
#endif

#endif /* TRELLIS_RUNTIME_KERNELS_NORM_E4M3_H */
