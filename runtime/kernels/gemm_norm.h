/* trellisc GEMM + residual + LayerNorm kernels (trellis.linear_residual_norm):
 * parameter block, tile constants and entry-point names.
 *
 * Plain C, no CUDA headers: the runtime (to launch through the driver API) and
 * the kernels include it, so the parameter block has one definition.
 *
 * What they compute, for rows r < rows and columns c < n (fp16 storage, fp32
 * math, each step rounded to fp16 as the unfused ops are):
 *
 *   h[r, c]   = fp16( sum_k a[r, k] * w[c, k] + bias[c] )
 *   v[r, c]   = fp16( x[r, c] + gate[s, c] * h[r, c] )      (gate, else + h)
 *   v[r, c]   = fp16( v[r, c] + plus[s, c] )                 (with plus)
 *   residual_out[r, c] = v[r, c]
 *   y         = (v[r, c] - mean_r) / sqrt(var_r + eps)       (biased variance
 *               over the row's n values)
 *   out[r, c] = fp16( y * (1 + scale[s, c]) + shift[s, c] )  (modulate), or
 *               fp16( y * norm_weight[c] + norm_bias[c] )    (affine), or
 *               fp16( y )
 *
 * with s = r / tokens the row's sample (the per-sample [B, n] adaLN vectors).
 *
 * Two implementations:
 *  - trellis_gemm_norm_sm90_n<N> (sm_90a): one kernel. A cluster of N / 256
 *    CTAs spans a row block's n columns; each CTA computes a 128 x 256 tile
 *    (TMA loads, wgmma, warp-specialized), and the row statistics are combined
 *    across the cluster through distributed shared memory, so neither h nor
 *    the residual goes back through device memory before the norm.
 *    Requirements (checked by the runtime): n == N, k a multiple of 64 and at
 *    least 64 * TRELLIS_GEMM_NORM_MIN_KSTEPS, tokens
 *    a multiple of 128, 16-byte aligned rows.
 *  - trellis_residual_norm_rows (any architecture): the row part alone after a
 *    cuBLASLt GEMM has written h (`h` set, tensor maps unused).
 */
#ifndef TRELLIS_RUNTIME_KERNELS_GEMM_NORM_H
#define TRELLIS_RUNTIME_KERNELS_GEMM_NORM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TrellisGemmNormParams {
  const void *bias;         /* fp16 [n] (the fused kernel) */
  const void *h;            /* fp16 [rows, n]: the GEMM's result (row kernel) */
  const void *x;            /* fp16 [rows, n]: the residual stream */
  void *residual_out;       /* fp16 [rows, n] (may alias x) */
  void *out;                /* fp16 [rows, n] */
  const void *gate;         /* fp16 [B, n] or NULL (v = x + h) */
  const void *plus;         /* fp16 [B, n] or NULL */
  const void *shift;        /* fp16 [B, n] (modulate) or NULL */
  const void *scale;        /* fp16 [B, n] (modulate) or NULL */
  const float *norm_weight; /* fp32 [n] (affine) or NULL */
  const float *norm_bias;   /* fp32 [n] (affine) or NULL */
  int64_t rows;
  int64_t tokens; /* rows per sample of the [B, n] vectors */
  int32_t n, k;
  float eps;
} TrellisGemmNormParams;

/* The fused kernel's tile: 128 rows (two consumer warpgroups of 64) x 256
 * columns per CTA, 64-deep k steps through a ring of stages; one producer
 * warpgroup issues the TMA loads. */
#define TRELLIS_GEMM_NORM_BM 128
#define TRELLIS_GEMM_NORM_BN 256
#define TRELLIS_GEMM_NORM_BK 64
#define TRELLIS_GEMM_NORM_STAGES 4
#define TRELLIS_GEMM_NORM_THREADS 384
/* Dynamic shared memory: 1 KiB of alignment slack + the stages (A 128 x 64 and
 * W 256 x 64 halves each; the CTA's 128 x 256 tile of x is loaded into the two
 * stages the last two k steps do not use) + its 256-column slices of the seven
 * column vectors (bias, gate, plus, shift, scale as fp16, the affine weight
 * and bias as fp32) + the mbarriers + the row statistics. */
#define TRELLIS_GEMM_NORM_SMEM                                                 \
  (1024 +                                                                      \
   TRELLIS_GEMM_NORM_STAGES * (TRELLIS_GEMM_NORM_BM + TRELLIS_GEMM_NORM_BN) *  \
       TRELLIS_GEMM_NORM_BK * 2 +                                              \
   TRELLIS_GEMM_NORM_BN * (5 * 2 + 2 * 4) + 128 + TRELLIS_GEMM_NORM_BM * 8)
/* The fused kernel needs at least this many k steps (k >= 256). */
#define TRELLIS_GEMM_NORM_MIN_KSTEPS TRELLIS_GEMM_NORM_STAGES

/* The runtime's tensor maps: A and W boxes of 64 columns (128-byte swizzle) by
 * BM resp. BN rows; x in boxes of 64 columns by BM rows (128-byte swizzle). */

/* The widths n the sm_90a kernel is built for (a cluster of n / 256 CTAs). */
#define TRELLIS_GEMM_NORM_SM90_WIDTHS(X) X(512) X(1024)

#define TRELLIS_RESIDUAL_NORM_THREADS 128 /* 4 rows (one warp each) per CTA */

#ifdef __cplusplus
}
#endif

#endif
