/* trellisc attention kernels: entry points, parameter block and tile
 * configurations.
 *
 * Plain C (C99/C++), no CUDA headers: the compiler (to choose a configuration)
 * and the runtime (to launch it through the driver API) both include this file,
 * and so do the kernels themselves, so the parameter block has one definition.
 *
 * What the kernels compute, per sequence b and head h (fp16 in, fp16 out, fp32
 * softmax): O[b, i, h, :] = sum_j softmax_j( scale * <q'[b,i,h,:], k'[b,j,h,:]>
 * ) * V[b, j, h, :] with no mask, flash-attention style (online softmax, no L x
 * L buffer). q' = q and k' = k unless a head RMS-norm gain is given (q_gamma /
 * k_gamma, fp32 [heads, head_dim]); then, per token and head, u' = fp16( u /
 * max(||u||_2, 1e-12) * gamma[h, :] * sqrt(head_dim) )      (fp32 math) exactly
 * as TRELLIS stores its fp16 q/k before the product (spec §3.6).
 *
 * Layout: token-major. Element (b, i, h, e) of X lives at
 *     X + b * x_batch_stride + i * x_row_stride + h * x_head_stride + e (dense
 * mode) X + (cu_seqlens_x[b] + i) * x_row_stride + h * x_head_stride + e
 * (varlen mode) strides in elements. So q, k, v can be views into a packed qkv
 * [B, L, 3, H, d] buffer (row stride 3Hd, head stride d, k = q + Hd, v = q +
 * 2Hd) or a packed kv [B, Lc, 2, H, d]; a batch stride of 0 broadcasts K/V over
 * the batch (cross-attention to one context). Requirements (checked by
 * trellis_attn_check): every base pointer 16-byte aligned, every row and head
 * stride and every batch stride a multiple of 8 elements, innermost stride 1.
 *
 * Queries and keys choose dense or varlen mode independently: cu_seqlens_q ==
 * NULL means dense queries (length seqlen_q for every sequence), otherwise
 * segment b holds rows cu_seqlens_q[b] .. cu_seqlens_q[b+1]-1 (int32, num_seqs
 * + 1 entries, on the device). The same for keys/values with cu_seqlens_k. In
 * varlen mode seqlen_q must be >= the longest query segment (it sizes the
 * grid); seqlen_k is ignored for varlen keys. A sequence with no keys gets O =
 * 0.
 */
#ifndef TRELLIS_RUNTIME_KERNELS_ATTENTION_H
#define TRELLIS_RUNTIME_KERNELS_ATTENTION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Passed by value as the kernels' only parameter (cuLaunchKernel kernelParams =
 * { &params }). */
typedef struct TrellisAttnParams {
  const void *q; /* fp16 */
  const void *k; /* fp16 */
  const void *v; /* fp16 */
  void *o;       /* fp16 */
  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  int64_t o_batch_stride, o_row_stride, o_head_stride;
  const int32_t *cu_seqlens_q; /* NULL: dense queries */
  const int32_t *cu_seqlens_k; /* NULL: dense keys/values */
  const float
      *q_gamma; /* NULL: no RMS norm on q; else fp32 [heads, head_dim] */
  const float *k_gamma; /* NULL: no RMS norm on k */
  int32_t num_seqs;     /* batch size, or number of varlen segments */
  int32_t heads;
  int32_t seqlen_q;    /* dense: Lq; varlen: max segment length (grid sizing) */
  int32_t seqlen_k;    /* dense: Lk; varlen: ignored */
  int32_t head_dim;    /* must equal the kernel's head dim */
  float softmax_scale; /* usually 1/sqrt(head_dim) */
  /* Read by the FIXED_REF kernels only (attention_sm90.cuh): the gain of the
   * head RMS norm a pre-pass already applied to k (k_gamma is then NULL), or
   * NULL. With k normalized the logits are bounded, which keeps their fixed
   * softmax reference from overflowing. */
  const float *k_norm_gamma;
  /* One int32 per CTA (trellis_attn_redo_flags_count), device memory. A
   * FIXED_REF kernel writes every entry: 1 where its fixed reference
   * overflowed and the online kernel must recompute the CTA, else 0. An
   * online kernel given the array computes only the CTAs flagged 1 (its
   * second launch, same grid). NULL for a plain online launch. */
  int32_t *redo_flags;
  /* 0: o is fp16. Else (sm_90a kernels only) o is E4M3 for the FP8 linear
   * that reads it (runtime/cuda/Fp8Gemm.cpp): each value rounded to fp16 as
   * ever, times o_quantize, rounded to E4M3 (saturating); strides and offsets
   * count elements as for fp16, one byte each. */
  float o_quantize;
} TrellisAttnParams;

/* Kernel families. */
enum {
  TRELLIS_ATTN_SM90A =
      90, /* wgmma (warpgroup MMA) + cp.async pipeline; sm_90a cubin only */
  TRELLIS_ATTN_SM80 =
      80, /* mma.sync m16n8k16 + cp.async + ldmatrix; PTX for compute_80 */
  TRELLIS_ATTN_SM75 =
      75 /* same template, m16n8k8 + synchronous loads; PTX for compute_75 */
};

/* Shared-memory bytes (dynamic) of each family, in one place for kernels and
 * hosts. */
/* sm90: Q tile + stages x (K tile + V tile), 128B-swizzled, plus 1 KiB for
 * 1024-byte alignment. */
/* sm90 kernel variants (the VARIANT mask of attn_fwd_sm90, attention_sm90.cuh,
 * where each is explained). */
#define TRELLIS_ATTN_SM90_MBAR_PIPELINE 1
#define TRELLIS_ATTN_SM90_ROWSUM_MMA 2
#define TRELLIS_ATTN_SM90_FIXED_REF 4
/* 1024 bytes of alignment slack, then Q, the stages and the MBAR_PIPELINE
 * barriers; ROWSUM_MMA adds a BN x 128-byte block of ones to every stage. */
#define TRELLIS_ATTN_SM90_SMEM(D, BM, BN, ST, VAR)                             \
  (((BM) + 2 * (ST) * (BN)) * (D)*2 + 1024 + 16 * (ST) +                       \
   (((VAR)&TRELLIS_ATTN_SM90_ROWSUM_MMA) ? (ST) * (BN)*128 : 0))
/* sm80/sm75: rows padded by 8 halves (conflict-free ldmatrix without swizzle).
 */
#define TRELLIS_ATTN_SM80_SMEM(D, BM, BN, ST)                                  \
  (((BM) + 2 * (ST) * (BN)) * ((D) + 8) * 2)

/* One compiled kernel. The kernel's name in its module is `name`. */
typedef struct TrellisAttnConfig {
  const char *name;
  int32_t family; /* TRELLIS_ATTN_SM90A / SM80 / SM75: which module holds it */
  int32_t head_dim;   /* 64, 80 or 128 */
  int32_t block_m;    /* query rows per CTA */
  int32_t block_n;    /* keys per pipeline tile */
  int32_t stages;     /* K/V shared-memory stages */
  int32_t threads;    /* threads per CTA */
  int32_t smem_bytes; /* dynamic shared memory per CTA */
  int32_t min_blocks; /* CTAs per SM the register budget was compiled for */
  int32_t variant;    /* sm90: mask of TRELLIS_ATTN_SM90_* flags; else 0 */
} TrellisAttnConfig;

#define TRELLIS_ATTN_NAME_SM90(D, BM, BN, ST)                                  \
  "trellis_attn_sm90_d" #D "_m" #BM "_n" #BN "_s" #ST
#define TRELLIS_ATTN_NAME_SM80(D, BM, BN, ST)                                  \
  "trellis_attn_sm80_d" #D "_m" #BM "_n" #BN "_s" #ST
#define TRELLIS_ATTN_NAME_SM75(D, BM, BN, ST)                                  \
  "trellis_attn_sm75_d" #D "_m" #BM "_n" #BN "_s" #ST

/* X-macro lists of the instantiated configurations: (D, BM, BN, STAGES,
 * MIN_BLOCKS[, VARIANT, SUFFIX]). attention_sm90a.cu and attention_sm80.cu
 * instantiate exactly these; the table below lists them. sm90: BM = 64 x
 * warpgroups; Q is a register operand where the register budget allows (d=64,
 * 1 CTA/SM), else read from shared memory; head dims that are multiples of 64
 * use 128-byte swizzled tiles, others (80) 32-byte swizzle. VARIANT is a mask
 * of TRELLIS_ATTN_SM90_* flags (name suffix _mbrs = MBAR_PIPELINE |
 * ROWSUM_MMA, _fx = FIXED_REF: launched together with its online twin,
 * trellis_attn_online_twin). Measured on the H100 (bench/attention/README.md):
 * for d64 sequences of >= 1024 rows m256_n64_s4_mbrs or m192_n128_s3_mbrs (they
 * read K/V once per 256 or 192 queries: 417 and ~428 TFLOP/s with full waves vs
 * 366 for m128_n64_s4), whichever fills the waves better; m128_n64_s4 for
 * short windows; d80 -> m128_n64_s4, d128 -> m128_n128_s3. GpuExecutor picks
 * per call (attentionKernel). */
#define TRELLIS_ATTN_SM90_CONFIGS(X)                                           \
  X(64, 128, 64, 4, 2, 0, )                                                    \
  X(64, 128, 64, 3, 2, 0, )                                                    \
  X(64, 256, 64, 4, 1, 0, )                                                    \
  X(64, 256, 64, 4, 1, 3, _mbrs)                                               \
  X(64, 256, 64, 4, 1, 7, _mbrs_fx)                                            \
  X(64, 192, 128, 3, 1, 3, _mbrs)                                              \
  X(64, 192, 128, 3, 1, 7, _mbrs_fx)                                           \
  X(64, 128, 128, 3, 1, 0, )                                                   \
  X(80, 128, 64, 4, 1, 0, )                                                    \
  X(80, 128, 128, 3, 1, 0, )                                                   \
  X(128, 128, 64, 3, 1, 0, )                                                   \
  X(128, 128, 128, 3, 1, 0, )
/* sm80: BM = 16 x warps, STAGES 1 or 2. */
#define TRELLIS_ATTN_SM80_CONFIGS(X)                                           \
  X(64, 128, 64, 2, 1)                                                         \
  X(64, 64, 64, 2, 2)                                                          \
  X(80, 128, 64, 2, 1)                                                         \
  X(80, 64, 64, 2, 2)                                                          \
  X(128, 128, 64, 2, 1)                                                        \
  X(128, 64, 64, 2, 2)
/* sm75 (Turing, 64 KiB shared memory): single stage, synchronous loads. */
#define TRELLIS_ATTN_SM75_CONFIGS(X)                                           \
  X(64, 64, 64, 1, 2)                                                          \
  X(80, 64, 64, 1, 2)                                                          \
  X(128, 64, 64, 1, 1)

#define TRELLIS_ATTN_CFG_SM90(D, BM, BN, ST, MB, VAR, SUF)                     \
  {TRELLIS_ATTN_NAME_SM90(D, BM, BN, ST) #SUF,                                 \
   TRELLIS_ATTN_SM90A,                                                         \
   D,                                                                          \
   BM,                                                                         \
   BN,                                                                         \
   ST,                                                                         \
   (BM)*2,                                                                     \
   TRELLIS_ATTN_SM90_SMEM(D, BM, BN, ST, VAR),                                 \
   MB,                                                                         \
   VAR},
#define TRELLIS_ATTN_CFG_SM80(D, BM, BN, ST, MB)                               \
  {TRELLIS_ATTN_NAME_SM80(D, BM, BN, ST),                                      \
   TRELLIS_ATTN_SM80,                                                          \
   D,                                                                          \
   BM,                                                                         \
   BN,                                                                         \
   ST,                                                                         \
   (BM)*2,                                                                     \
   TRELLIS_ATTN_SM80_SMEM(D, BM, BN, ST),                                      \
   MB,                                                                         \
   0},
#define TRELLIS_ATTN_CFG_SM75(D, BM, BN, ST, MB)                               \
  {TRELLIS_ATTN_NAME_SM75(D, BM, BN, ST),                                      \
   TRELLIS_ATTN_SM75,                                                          \
   D,                                                                          \
   BM,                                                                         \
   BN,                                                                         \
   ST,                                                                         \
   (BM)*2,                                                                     \
   TRELLIS_ATTN_SM80_SMEM(D, BM, BN, ST),                                      \
   MB,                                                                         \
   0},

/* Every configuration that the in-tree modules contain. */
static const TrellisAttnConfig trellis_attn_configs[] = {
    TRELLIS_ATTN_SM90_CONFIGS(TRELLIS_ATTN_CFG_SM90)
        TRELLIS_ATTN_SM80_CONFIGS(TRELLIS_ATTN_CFG_SM80)
            TRELLIS_ATTN_SM75_CONFIGS(TRELLIS_ATTN_CFG_SM75)};
static const int trellis_attn_num_configs =
    (int)(sizeof(trellis_attn_configs) / sizeof(trellis_attn_configs[0]));

/* Launch geometry: grid = (tiles(seqlen_q) * num_seqs, heads, 1), block =
 * (threads, 1, 1). */
static inline void trellis_attn_grid(const TrellisAttnConfig *c,
                                     const TrellisAttnParams *p,
                                     unsigned grid[3], unsigned block[3]) {
  unsigned tiles = (unsigned)((p->seqlen_q + c->block_m - 1) / c->block_m);
  grid[0] = tiles * (unsigned)p->num_seqs;
  grid[1] = (unsigned)p->heads;
  grid[2] = 1;
  block[0] = (unsigned)c->threads;
  block[1] = 1;
  block[2] = 1;
}

/* FIXED_REF launches: the number of int32 entries redo_flags needs (one per
 * CTA of the grid). */
static inline long long
trellis_attn_redo_flags_count(const TrellisAttnConfig *c,
                              const TrellisAttnParams *p) {
  unsigned grid[3], block[3];
  trellis_attn_grid(c, p, grid, block);
  return (long long)grid[0] * grid[1];
}

/* The configuration of the same family and tile shape with the other softmax:
 * fixed -> 1 gives the FIXED_REF kernel of an online one (NULL if none is
 * instantiated), fixed -> 0 the online kernel of a FIXED_REF one, which runs
 * after it with the same parameters and recomputes the CTAs it flagged. */
static inline const TrellisAttnConfig *
trellis_attn_softmax_twin(const TrellisAttnConfig *c, int fixed) {
  const int want = fixed ? (c->variant | TRELLIS_ATTN_SM90_FIXED_REF)
                         : (c->variant & ~TRELLIS_ATTN_SM90_FIXED_REF);
  int i;
  for (i = 0; i < trellis_attn_num_configs; ++i) {
    const TrellisAttnConfig *t = &trellis_attn_configs[i];
    if (t->family == c->family && t->head_dim == c->head_dim &&
        t->block_m == c->block_m && t->block_n == c->block_n &&
        t->stages == c->stages && t->min_blocks == c->min_blocks &&
        t->variant == want)
      return t;
  }
  return 0;
}

/* Returns NULL when the parameters suit the configuration, else a message. */
static inline const char *trellis_attn_check(const TrellisAttnConfig *c,
                                             const TrellisAttnParams *p) {
  const int64_t s[12] = {p->q_batch_stride, p->q_row_stride, p->q_head_stride,
                         p->k_batch_stride, p->k_row_stride, p->k_head_stride,
                         p->v_batch_stride, p->v_row_stride, p->v_head_stride,
                         p->o_batch_stride, p->o_row_stride, p->o_head_stride};
  int i;
  if (p->head_dim != c->head_dim)
    return "head_dim differs from the kernel's";
  if (!p->q || !p->k || !p->v || !p->o)
    return "null tensor pointer";
  if (((uintptr_t)p->q | (uintptr_t)p->k | (uintptr_t)p->v | (uintptr_t)p->o) &
      15u)
    return "q/k/v/o must be 16-byte aligned";
  for (i = 0; i < 12; ++i)
    if (s[i] % 8 != 0)
      return "strides must be multiples of 8 elements";
  if (p->num_seqs <= 0 || p->heads <= 0)
    return "num_seqs and heads must be positive";
  if (p->seqlen_q < 0 || (!p->cu_seqlens_k && p->seqlen_k < 0))
    return "negative sequence length";
  if ((long long)((p->seqlen_q + c->block_m - 1) / c->block_m) * p->num_seqs >
      0x7fffffffLL)
    return "grid too large";
  if (p->heads > 65535)
    return "too many heads for grid.y";
  if ((c->variant & TRELLIS_ATTN_SM90_FIXED_REF) &&
      (!p->redo_flags || !(p->softmax_scale > 0.f)))
    return "a fixed-reference kernel needs redo_flags and a positive scale";
  if (p->o_quantize != 0.f && c->family != TRELLIS_ATTN_SM90A)
    return "an E4M3 output (o_quantize) needs an sm_90a kernel";
  return 0;
}

/* ---- choosing a configuration
 * The compiler's tiling phase (trellis-tile-attention) annotates every
 * attention op with the configurations it may run (`tiles`, per family: the
 * short-sequence default first, then long-sequence candidates where the
 * query length is only known at run time); the runtime launches the one
 * trellis_attn_choose picks from its family's. Both use these functions. */

/* The configuration named `name`, or NULL. */
static inline const TrellisAttnConfig *trellis_attn_find(const char *name) {
  int i, j;
  for (i = 0; i < trellis_attn_num_configs; ++i) {
    const char *a = trellis_attn_configs[i].name;
    for (j = 0; a[j] && a[j] == name[j]; ++j)
      ;
    if (a[j] == name[j])
      return &trellis_attn_configs[i];
  }
  return 0;
}

/* A family's configuration for short sequences of head dim d (NULL: none).
 * sm_90a: 128 query rows and two CTAs per SM; 64-key tiles in 4 stages for
 * d = 64 and 80, 128-key tiles in 3 for d = 128 (bench/attention/README.md).
 * sm_80 / sm_75: the family's first configuration for d. */
static inline const TrellisAttnConfig *trellis_attn_default_config(int family,
                                                                   int d) {
  int i;
  for (i = 0; i < trellis_attn_num_configs; ++i) {
    const TrellisAttnConfig *c = &trellis_attn_configs[i];
    if (c->family != family || c->head_dim != d || c->variant != 0)
      continue;
    if (family != TRELLIS_ATTN_SM90A ||
        (c->block_m == 128 && c->block_n == (d == 128 ? 128 : 64) &&
         c->stages == (d == 128 ? 3 : 4)))
      return c;
  }
  return 0;
}

/* Query rows from which the long-sequence candidates are considered. */
#define TRELLIS_ATTN_LONG_SEQUENCE_ROWS 1024

/* The full-wave rate (TFLOP/s, H100, bench/attention/README.md) of a
 * long-sequence candidate, 0 for any other configuration. The candidates are
 * the sm_90a d = 64 kernels of 192 or 256 query rows per CTA (one CTA per
 * SM, MBAR_PIPELINE | ROWSUM_MMA): they read K/V once per 192 or 256
 * queries, 428 and 417 TFLOP/s with full waves against 366 for the 128-row
 * default (which therefore never wins the estimate below). */
static inline double
trellis_attn_long_sequence_rate(const TrellisAttnConfig *c) {
  if (c->family != TRELLIS_ATTN_SM90A || c->head_dim != 64 ||
      c->variant !=
          (TRELLIS_ATTN_SM90_MBAR_PIPELINE | TRELLIS_ATTN_SM90_ROWSUM_MMA))
    return 0;
  if (c->block_m == 192 && c->block_n == 128 && c->stages == 3)
    return 428.0;
  if (c->block_m == 256 && c->block_n == 64 && c->stages == 4)
    return 417.0;
  return 0;
}

/* Of `candidates` (n >= 1; [0] the short-sequence default), the configuration
 * to launch for `num_seqs` x `heads` sequences of up to `seqlen_q` query rows
 * on `multiprocessors` SMs: the default, unless seqlen_q >= 1024 and some
 * candidate has a long-sequence rate; then the one whose waves finish first,
 * estimated as ceil(CTAs / SMs) x rows / rate (the earlier on a tie). E.g.
 * L = 4096: 256 rows; the SLat flow's L = 4368: 192 rows (132 SMs). */
static inline const TrellisAttnConfig *
trellis_attn_choose(const TrellisAttnConfig *const *candidates, int n,
                    long long seqlen_q, long long num_seqs, long long heads,
                    int multiprocessors) {
  const TrellisAttnConfig *best = 0;
  double best_time = 0;
  int i;
  if (seqlen_q >= TRELLIS_ATTN_LONG_SEQUENCE_ROWS && multiprocessors > 0) {
    for (i = 1; i < n; ++i) {
      const double rate = trellis_attn_long_sequence_rate(candidates[i]);
      const long long rows = candidates[i]->block_m;
      long long ctas;
      double time;
      if (rate <= 0)
        continue;
      ctas = (seqlen_q + rows - 1) / rows * num_seqs * heads;
      time = (double)((ctas + multiprocessors - 1) / multiprocessors) *
             (double)rows / rate;
      if (!best || time < best_time) {
        best = candidates[i];
        best_time = time;
      }
    }
  }
  return best ? best : candidates[0];
}

/* ---- standalone head RMS norm (pre-pass)
 * ------------------------------------------------------- y[r, h, :] = fp16(
 * x[r, h, :] / max(||x[r, h, :]||, 1e-12) * gamma[h, :] * sqrt(head_dim) ),
 * fp32 math. Rows are tokens: for a batch of contiguous sequences (packed qkv
 * [B, L, 3, H, d]) row r = b*L + i and x_row_stride = 3Hd. y may equal x (in
 * place). Kernels "trellis_head_rmsnorm_d64/_d80/_d128" exist in every module.
 * The fused prologue (q_gamma/k_gamma above) normalizes the K tiles in every
 * query tile's CTA (ceil(Lq/block_m) times per key); for long sequences
 * normalizing k once with this pre-pass and running attention with k_gamma =
 * NULL is cheaper (bench/attention/README.md). */
typedef struct TrellisHeadRmsNormParams {
  const void *x; /* fp16 */
  void *y;       /* fp16 */
  int64_t x_row_stride, x_head_stride;
  int64_t y_row_stride, y_head_stride;
  const float *gamma; /* fp32 [heads, head_dim] */
  int32_t rows;
  int32_t heads;
  int32_t head_dim;
  int32_t reserved;
} TrellisHeadRmsNormParams;

#define TRELLIS_HEAD_RMSNORM_THREADS 256
/* lanes per (row, head): the largest power of two <= 16 that divides head_dim /
 * 8 */
#define TRELLIS_HEAD_RMSNORM_TPR(D)                                            \
  (((D) / 8) % 16 == 0  ? 16                                                   \
   : ((D) / 8) % 8 == 0 ? 8                                                    \
   : ((D) / 8) % 4 == 0 ? 4                                                    \
   : ((D) / 8) % 2 == 0 ? 2                                                    \
                        : 1)

static inline unsigned
trellis_head_rmsnorm_grid(const TrellisHeadRmsNormParams *p) {
  const long long lanes =
      (long long)p->rows * p->heads * TRELLIS_HEAD_RMSNORM_TPR(p->head_dim);
  return (unsigned)((lanes + TRELLIS_HEAD_RMSNORM_THREADS - 1) /
                    TRELLIS_HEAD_RMSNORM_THREADS);
}

/* FP8 self-attention (sm_90a, head_dim 64; attention_fp8_sm90.cuh): q and k
 * head-RMS-normalized (q_gamma and k_gamma required), then Q, K, V and P in
 * E4M3 with fp32 accumulation. Two kernels prepare K and V from the fp16
 * views (strides and cu_seqlens as in TrellisAttnParams; the same segments
 * for queries and keys), then the attention reads q itself:
 *   trellis_attn_fp8_v_amax_d64   v_amax[h] = max |v| over every token of head
 *                                  h (v_amax zeroed before; atomic maximum;
 *                                  grid ceil(tokens / 8), 256 threads, 4
 *                                  bytes of shared memory per head)
 *   trellis_attn_fp8_prepare_d64  k8: [heads, tokens, 64] E4M3 of the
 *                                  normalized fp16 k' times the head's scale
 *                                  448 / (8 max|gamma_h|) (|k'| <= 8 |gamma|
 *                                  bounds it); vt8: [heads, 64, padded
 *                                  tokens] E4M3 of v times 448 / v_amax[h],
 *                                  transposed (the wgmma B operand of P V
 *                                  must be K-major in 8 bits), each segment
 *                                  padded with zeros to a multiple of 128
 *                                  keys, keys permuted within each 32 as the
 *                                  P register fragment expects (grid
 *                                  padded_tokens / 128 x heads, 256 threads)
 *   trellis_attn_fp8_sm90_d64_*   the attention: q normalized and quantized
 *                                  the same way in its prologue, then over
 *                                  k8, vt8; O fp16 (or E4M3 with o_quantize)
 *                                  as TrellisAttnParams' o (grid num_seqs *
 *                                  ceil(seqlen / BM) x heads, 2 BM threads);
 *                                  a CTA whose softmax weights exceed 2^8 is
 *                                  flagged in redo_flags for the fp16 online
 *                                  kernel of its tile shape
 * tokens = num_seqs * seqlen (dense) or cu_seqlens[num_seqs];
 * padded_tokens = the sum of the segments' lengths rounded up to 128. */
typedef struct TrellisAttnFp8Params {
  const void *q, *k, *v; /* fp16 views, as TrellisAttnParams */
  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  void *o; /* fp16 (or E4M3, o_quantize) */
  int64_t o_batch_stride, o_row_stride, o_head_stride;
  const int32_t *cu_seqlens; /* NULL: dense */
  const float *q_gamma, *k_gamma;
  uint8_t *k8, *vt8; /* the prepared operands (device memory) */
  /* [heads]: computed by trellis_attn_fp8_v_amax_d64, or the op's static
   * (calibrated) v_amax, uploaded once, when that kernel is not run. */
  float *v_amax;
  /* Calibration, else NULL: [heads] raised to v_amax by the amax kernel. */
  float *v_amax_running;
  /* One int32 per CTA of the attention kernel, written by every CTA: 1 where
   * a softmax weight exceeded 2^8 and the fp16 online kernel of the same tile
   * shape (given the same flags) must recompute the CTA, else 0. */
  int32_t *redo_flags;
  int32_t num_seqs, heads, seqlen, head_dim;
  int32_t tokens, padded_tokens;
  float softmax_scale;
  float o_quantize;
} TrellisAttnFp8Params;

/* Segments are padded to a multiple of 128 keys in vt8; the pre-pass kernel
 * runs 256 threads per 128-key block. */
#define TRELLIS_ATTN_FP8_PAD 128
#define TRELLIS_ATTN_FP8_PREP_THREADS 256
/* trellis_attn_fp8_v_amax_d64: 256 threads per block over 8 tokens, dynamic
 * shared memory of 4 bytes per head. */
#define TRELLIS_ATTN_FP8_AMAX_THREADS 256
#define TRELLIS_ATTN_FP8_AMAX_TOKENS 8
/* Dynamic shared memory of trellis_attn_fp8_sm90_d64_m<BM>_n<BN>_s<ST>: 1 KiB
 * alignment slack, the fp16 Q (BM x 128 bytes), the stages (K: BN x 64 bytes,
 * V^T and 8 rows of ones: 72 x BN bytes), the mbarriers. */
#define TRELLIS_ATTN_FP8_SMEM(BM, BN, ST)                                      \
  (1024 + (BM)*128 + (ST) * (BN) * (64 + 72) + 16 * (ST))

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TRELLIS_RUNTIME_KERNELS_ATTENTION_H */
