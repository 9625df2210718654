//===- Kernels.h - CPU reference kernels of the trellis dialect -----------===//
//
// One plain C++ function per operation of the `trellis` dialect, on
// HostTensors. They are the oracle of every later test (IR interpretation,
// GPU kernels) and the CPU fallback. The semantics are the dialect's, which
// are the TRELLIS v1 inference spec's (shared/spec/TRELLIS-v1-inference.md,
// cited as §n below).
//
// Tensors: f16 tensors hold IEEE binary16 bit patterns (uint16_t), f32
// tensors floats, i32/i64 integers; row-major, contiguous.
//
// Precision contract (spec §11): every kernel converts its floating inputs
// to f32, computes and accumulates in f32, and rounds only its OUTPUT to the
// output dtype (round to nearest even, floatToHalf). A chain of kernels thus
// reproduces TRELLIS's fp16 storage points when the graph places its casts as
// TRELLIS does. Double precision is used only where stated: the sampler time
// grid (NumPy float64 in TRELLIS), and the transcendental functions of the
// embedding frequency tables, which are evaluated in double and rounded once
// to f32 so that the tables are the correctly rounded f32 values.
// Reductions run in a fixed order: dot products with 8 interleaved f32
// partial sums (detail::dotF32), norm statistics with a cascade sum.
//
// Where one dialect op is several PyTorch ops, the kernel rounds once where
// PyTorch rounds after each: modulate (PyTorch: h·(1 + s) to fp16, then
// + shift), gated_residual (gate·h, then + x) and the downsample (PyTorch sums
// with fp16 atomics). The difference is at most about an fp16 ulp per op.
//
// Dtypes: the output takes the dtype of the primary input (x, feats, q, ...).
// Parameters that TRELLIS keeps in f32 next to f16 activations (norm γ/β,
// RMS γ) may be f16 or f32; weights of linear/conv may be either too.
// Elementwise binary ops require one dtype for both operands.
//
// Errors: shape or dtype mismatches return an Error naming the op
// (e.g. "trellis.linear: ..."); nothing throws.
//
// Threads: see Parallel.h; results are bit-identical for any thread count.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_REFERENCE_KERNELS_H
#define TRELLIS_REFERENCE_KERNELS_H

#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Result.h"

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace trellis::ref {

//===----------------------------------------------------------------------===//
// Dense: GEMM and elementwise
//===----------------------------------------------------------------------===//

/// trellis.linear: y = x·Wᵀ + b over the last axis. x [..., K], W [O, K]
/// (PyTorch layout), optional b [O]; result [..., O] in x's dtype.
Result<HostTensor> linear(const HostTensor &x, const HostTensor &weight,
                          const HostTensor *bias = nullptr);
/// trellis.linear with precision = "fp8_e4m3": the same shapes and result
/// dtype, the product computed as the W8A8 E4M3 linear of Fp8.h
/// (linearE4M3: per-tensor scales of x and W, exact E4M3 products, f32
/// accumulation), then rounded to x's dtype. `activationAmax` > 0: x's
/// scale is static, from that amax (trellis.linear's activation_amax).
Result<HostTensor> linearFp8(const HostTensor &x, const HostTensor &weight,
                             const HostTensor *bias,
                             float activationAmax = 0.0f);
/// max |x| over x's finite values (0 for none): the amax an FP8 linear's
/// dynamic scale is made from, and what calibration records.
Result<float> e4m3Amax(const HostTensor &x);

/// trellis.matmul: NumPy matmul of a [..., M, K] and b [..., K, N] (both of
/// rank >= 2, one float dtype) with broadcast batch dimensions.
Result<HostTensor> matmul(const HostTensor &a, const HostTensor &b);

enum class BinaryKind {
  Add,
  Sub,
  Mul,
  Div,
  Maximum,
  Pow,
  Greater,
  Less,
  Equal
};

/// cond ≠ 0 ? a : b elementwise, the three shapes broadcast (NumPy); one
/// float dtype.
Result<HostTensor> where(const HostTensor &cond, const HostTensor &a,
                         const HostTensor &b);

/// Elementwise binary op with NumPy broadcasting. Both operands have one
/// dtype (f16, f32, i32 or i64; div is float only). Integer ops wrap.
Result<HostTensor> binary(BinaryKind kind, const HostTensor &a,
                          const HostTensor &b);
Result<HostTensor> add(const HostTensor &a, const HostTensor &b);
Result<HostTensor> sub(const HostTensor &a, const HostTensor &b);
Result<HostTensor> mul(const HostTensor &a, const HostTensor &b);
Result<HostTensor> div(const HostTensor &a, const HostTensor &b);
Result<HostTensor> maximum(const HostTensor &a, const HostTensor &b);

enum class UnaryKind {
  Silu,     ///< x·sigmoid(x)
  Gelu,     ///< tanh approximation (§3.6), TRELLIS's own models
  GeluErf,  ///< exact 0.5·x·(1 + erf(x/√2)): DINOv2 (image spec §2.4)
  Sigmoid,  ///< 1/(1+e^-x)
  Tanh,     ///<
  Softplus, ///< PyTorch's: x if x > 20 else log1p(e^x)
  Atanh,
  Exp,
  Log,
  Sin,
  Cos,
  Neg,
  Sqrt,
  Abs
};

/// The f32 formula of a unary op on one value.
float unaryScalar(UnaryKind kind, float x);

/// Elementwise unary op on a float tensor (same shape and dtype out).
Result<HostTensor> unary(UnaryKind kind, const HostTensor &x);
Result<HostTensor> silu(const HostTensor &x);
Result<HostTensor> gelu(const HostTensor &x);
Result<HostTensor> sigmoid(const HostTensor &x);
Result<HostTensor> tanh(const HostTensor &x);
Result<HostTensor> softplus(const HostTensor &x);
Result<HostTensor> atanh(const HostTensor &x);
Result<HostTensor> exp(const HostTensor &x);
Result<HostTensor> log(const HostTensor &x);
Result<HostTensor> sin(const HostTensor &x);
Result<HostTensor> cos(const HostTensor &x);
Result<HostTensor> neg(const HostTensor &x);
Result<HostTensor> sqrt(const HostTensor &x);
Result<HostTensor> abs(const HostTensor &x);

/// trellis.broadcast_rows: row [1, R...] -> `shape` = [N..., R...] with every
/// result[n..., :] = row[0, ...]; any dtype.
Result<HostTensor> broadcastRows(const HostTensor &row, const Shape &shape);

/// trellis.cast: f16 <-> f32 (round to nearest even), i32/i64 -> f32/f16.
Result<HostTensor> cast(const HostTensor &x, DType to);

/// x·(1 + scale) + shift (§3.6). shift/scale have x's shape, or are [B, C]
/// vectors broadcast over the tokens of x [B, ..., C] (rank >= 3).
Result<HostTensor> modulate(const HostTensor &x, const HostTensor &shift,
                            const HostTensor &scale);

/// x + gate·h (operands in the dialect's order x, h, gate); h has x's
/// shape, gate as shift in modulate.
Result<HostTensor> gatedResidual(const HostTensor &x, const HostTensor &h,
                                 const HostTensor &gate);

//===----------------------------------------------------------------------===//
// Dense: normalization, attention, embeddings
//===----------------------------------------------------------------------===//

/// trellis.layer_norm over one axis (negative counts from the end): biased
/// variance, (x − mean)/sqrt(var + eps), then ·γ + β when given (each
/// [dim(axis)]). axis = -1 is LN32 (§3.6); axis = 1 of NCDHW is the SS
/// decoder's ChannelLayerNorm32 (§5.1).
Result<HostTensor> layerNorm(const HostTensor &x, int axis, float eps,
                             const HostTensor *gamma = nullptr,
                             const HostTensor *beta = nullptr);

/// trellis.layer_norm_modulate: layerNorm over the last axis without affine,
/// then modulate, both in f32 with one rounding to x's dtype at the end (the
/// unfused pair also rounds the normalized value: at most about one ulp of
/// the result apart).
Result<HostTensor> layerNormModulate(const HostTensor &x,
                                     const HostTensor &shift,
                                     const HostTensor &scale, float eps);

/// trellis.head_rms_norm (§3.6): x [..., H, d], γ [H, d];
/// u / max(‖u‖₂, 1e-12) · γ[h] · √d per vector u (an L2 norm, no mean-square).
Result<HostTensor> headRmsNorm(const HostTensor &x, const HostTensor &gamma);

/// trellis.softmax along one axis (max-subtracted, f32).
Result<HostTensor> softmax(const HostTensor &x, int axis);

/// trellis.reduce: "sum" (pairwise, f32), "mean" (that sum / n) or "max"
/// (NaN propagates) over one axis, dropped or kept with size 1.
Result<HostTensor> reduce(const HostTensor &x, const std::string &kind,
                          int axis, bool keepdim);

/// trellis.attention: q [B, Lq, H, d], k [B, Lk, H, d], v [B, Lk, H, dv]
/// -> [B, Lq, H, dv]; softmax(scale·q·kᵀ)·v per (b, h), no mask, f32 softmax.
Result<HostTensor> attention(const HostTensor &q, const HostTensor &k,
                             const HostTensor &v, float scale);

/// trellis.attention with precision = "fp8_e4m3": the CPU model of the GPU's
/// FP8 self-attention (runtime/kernels/attention_fp8_sm90.cuh), E4M3 Q, K, V
/// and P. q, k, v [B, L, H, 64] (one shape: self-attention), qGamma and
/// kGamma [H, 64] (the fused head RMS norms, which the FP8 form requires);
/// result [B, L, H, 64] in q's dtype. Each batch entry is one sequence. For
/// every head h (Fp8.h's toE4M3 / fromE4M3, all arithmetic fp32 unless
/// said otherwise):
///   q' = headRmsNorm(q, qGamma), k' = headRmsNorm(k, kGamma) (rounded to
///        q's / k's dtype, as trellis.head_rms_norm);
///   s_q = 448 / (8 · max_e |qGamma[h, e]|) (1 if that max is 0; every
///        |q'_e| <= 8 |γ_e|, so nothing saturates), s_k likewise;
///   s_v = 448 / v_amax, dq_v = v_amax / 448 (e4m3ScaleFor), v_amax = max |v|
///        over head h of EVERY token of the op (all batch entries / rows;
///        fp8HeadAmax) — or `vAmax[h]` when given (the op's calibrated
///        v_amax: values of v beyond it saturate at ±448);
///   q8 = toE4M3(q' · s_q), k8 = toE4M3(k' · s_k), v8 = toE4M3(v · s_v);
///   c = (scale · 1.4426950408889634) / (s_q · s_k)   (log2 units);
///   S_ij = Σ_e fromE4M3(q8_ie) · fromE4M3(k8_je), summed exactly (double;
///        the products are exact, the sum has < 53 bits) and rounded once
///        to fp32;
///   bound_i = sqrt(64 · Σ_e (fromE4M3(q8_ie) · kGamma[h, e])²) · s_k · c ·
///        1.07 (each product rounded to fp32, the sum of squares exact and
///        rounded once), an upper bound of every logit S_ij · c;
///   ref_i = min(max_{j < min(64, len)} S_ij · c, bound_i − 8);
///   P_ij = fromE4M3(toE4M3(2^fma(S_ij, c, −ref_i))) (the fma as the GPU's
///        fmaf; 2^x is the double exp2 rounded to fp32): the largest of a
///        row is >= 1, and P_ij <= 2^8 for the first 64 keys;
///   l_i = Σ_j P_ij, O_i = Σ_j P_ij · fromE4M3(v8_j) (exact sums, rounded
///        once to fp32);
///   out_i = O_i · (dq_v / l_i), rounded to q's dtype;
///   except a row with a P_ij above 2^8 (a later key whose logit exceeds the
///        first 64 keys' largest by more than 8; it may saturate at 448): the
///        GPU recomputes its tile with the fp16 online kernel, and the row
///        gets the plain attention of q', k', v (attendOne). (The GPU's
///        other rows of that tile get it too; here they stay FP8: the two
///        differ there by FP8's own error. Random weights never trigger it.)
/// The GPU differs only in its fp32 summation order and precision (S, l, O,
/// the bound's sum of squares) and in 2^x (ex2.approx): an E4M3 rounding of
/// P can go the other way where 2^x is near a midpoint. Golden:
/// test/golden/fp8_np.py (attention). Bit-identical for any thread count.
Result<HostTensor> attentionFp8(const HostTensor &q, const HostTensor &k,
                                const HostTensor &v, const HostTensor &qGamma,
                                const HostTensor &kGamma, float scale,
                                std::span<const float> vAmax = {});

/// The largest |v| of each head over every token: v [..., H, d] (a dense
/// op's [B, L, H, d], a sparse one's [N, H, d]) -> H values, NaN skipped
/// (e4m3Amax): the FP8 attention's dynamic v scales, and what calibration
/// records.
Result<std::vector<float>> fp8HeadAmax(const HostTensor &v);

/// trellis.timestep_embedding (§3.6): tau [B] (already 1000·t) -> [B, dim]
/// f32 = [cos(τ f_j), sin(τ f_j)], COSINE first, f_j = exp(−ln(P)·j/half)
/// formed as TRELLIS does in f32; a zero column is appended for odd dim.
Result<HostTensor> timestepEmbedding(const HostTensor &tau, int64_t dim = 256,
                                     double maxPeriod = 10000.0);

/// trellis.ape (§3.6): pos [L, 3] integer -> [L, C] f32. F = ⌊C/6⌋,
/// ω_j = 1/10000^(j/F); per axis [sin(p·ω), cos(p·ω)] (SINE first), the three
/// axes x, y, z in order, zero-padded at the end to C.
Result<HostTensor> ape(const HostTensor &pos, int64_t channels);

//===----------------------------------------------------------------------===//
// Dense: convolution and shape ops
//===----------------------------------------------------------------------===//

/// trellis.conv3d (§5.1): cross-correlation on NCDHW, weight [O, I, kd, kh,
/// kw], stride 1, zero padding `padding` on every side (the dialect's
/// default 1: "same" for the 3×3×3 kernels of TRELLIS).
Result<HostTensor> conv3d(const HostTensor &x, const HostTensor &weight,
                          const HostTensor *bias = nullptr,
                          int64_t padding = 1);

/// trellis.pixel_shuffle_3d (§5.1): [B, C·s³, D, H, W] -> [B, C, sD, sH, sW],
/// out[b, c, s·x+s1, s·y+s2, s·z+s3] = in[b, c·s³ + s1·s² + s2·s + s3, x, y,
/// z].
Result<HostTensor> pixelShuffle3d(const HostTensor &x, int64_t factor = 2);

/// trellis.reshape: same elements, new shape (at most one -1). Shares bytes.
Result<HostTensor> reshape(const HostTensor &x, const Shape &shape);

/// trellis.permute: out.dim(i) = x.dim(perm[i]).
Result<HostTensor> permute(const HostTensor &x, const std::vector<int> &perm);

/// trellis.concat along an axis (one dtype, other dims equal).
Result<HostTensor> concat(const std::vector<HostTensor> &parts, int axis);

/// trellis.split along an axis into pieces of the given sizes (summing to
/// the dimension), in order.
Result<std::vector<HostTensor>> split(const HostTensor &x, int axis,
                                      const std::vector<int64_t> &sizes);

/// trellis.occupancy (§5.3): logits [B, 1, D, H, W] -> int32 [N, 4] rows
/// (b, x, y, z) of the voxels with logit > 0 (strictly), in argwhere order.
Result<HostTensor> occupancy(const HostTensor &logits);

//===----------------------------------------------------------------------===//
// Sampler (§3.2, §3.3)
//===----------------------------------------------------------------------===//

/// trellis.cfg_combine: (1 + w)·vc − w·vu, f32 math with w rounded to f32
/// (as PyTorch applies a Python scalar).
Result<HostTensor> cfgCombine(const HostTensor &vc, const HostTensor &vu,
                              double w);

/// trellis.euler_update: x − dt·v (dt = t − t_prev, rounded to f32).
Result<HostTensor> eulerUpdate(const HostTensor &x, const HostTensor &v,
                               double dt);

/// The sampler's time grid in float64 (steps + 1 values): t̃_i from
/// numpy.linspace(1, 0, steps + 1), then t_i = r·t̃_i / (1 + (r − 1)·t̃_i).
std::vector<double> timeGrid(int steps, double rescaleT);

/// Whether the step at t uses CFG: lo <= t <= hi, inclusive, on t in [0, 1].
bool isGuidedStep(double t, double lo, double hi);

/// The model's time input τ = float32(1000·t), the product formed in float64.
float modelTime(double t);

/// trellis.time_grid: [rows] f32, row i = modelTime(t_i) of the `steps`-step
/// grid for i < steps, 0 for i >= steps (rows the sampler never looks up;
/// `steps` < rows after a run-time steps override). steps > rows is an error.
Result<HostTensor> timeGridTable(int64_t rows, int64_t steps, double rescaleT);

/// The row of `grid` [S] f32 equal to `tau` (exactly), the first if several;
/// -1 if none.
int64_t timeGridIndex(const HostTensor &grid, float tau);

/// trellis.time_row: [B, D...] with row b = table[k], grid[k] == tau[b].
Result<HostTensor> timeRow(const HostTensor &table, const HostTensor &grid,
                           const HostTensor &tau);

//===----------------------------------------------------------------------===//
// Sparse (§5.4, §6, §7)
//===----------------------------------------------------------------------===//

/// A sparse voxel set (trellis `!trellis.coords`): int32 rows (b, x, y, z),
/// batch-contiguous with ascending b, each coordinate in [0, resolution), no
/// duplicate rows; `offsets` [B + 1] delimit each sample's rows.
struct CoordSet {
  HostTensor coords; ///< int32 [N, 4]
  int64_t resolution = 0;
  std::vector<int64_t> offsets; ///< B + 1 entries

  int64_t size() const { return coords.dim(0); }
  int64_t batchSize() const { return int64_t(offsets.size()) - 1; }
  const int32_t *row(int64_t n) const { return coords.data<int32_t>() + 4 * n; }

  /// Validates `coords` and computes the per-sample ranges. batchSize < 0:
  /// one more than the largest b (0 for an empty set).
  static Result<CoordSet> create(const HostTensor &coords, int64_t resolution,
                                 int64_t batchSize = -1);
};

/// trellis.sparse.neighbor_map: int32 [N, k³]; entry a·k² + β·k + γ of row p
/// is the row of (b, x+a−k/2, y+β−k/2, z+γ−k/2), or -1 if inactive.
Result<HostTensor> neighborMap(const CoordSet &coords, int64_t kernel);

/// trellis.sparse.conv3d (§6.4), spconv SubMConv3d. feats [N, I], weight
/// [O, k, k, k, I] (KRSC), optional bias [O], neighbour map [M, k³] whose
/// entries are rows of feats (M = N on the same coordinate set; the fine rows
/// of a parent neighbour map). k > 1: out [M, O],
/// out[p] = b + Σ_off W[:, off, :]·in[nb[p, off]].
/// k = 1 [quirk §6.4]: spconv's fast path, out = x·M + b with M the weight
/// buffer reinterpreted as [I, O] row-major (M[i, j] = flat[i·O + j]); NOT
/// x·W[:, 0, 0, 0, :]ᵀ.
Result<HostTensor> sparseConv3d(const HostTensor &feats,
                                const HostTensor &neighborMap,
                                const HostTensor &weight,
                                const HostTensor *bias = nullptr);

/// The k = 1 path of sparseConv3d on its own (no neighbour map needed).
Result<HostTensor> sparseConv1x1(const HostTensor &feats,
                                 const HostTensor &weight,
                                 const HostTensor *bias = nullptr);

/// trellis.sparse.coarsen (§6.3 steps 1–2): the distinct (b, ⌊x/f⌋, ⌊y/f⌋,
/// ⌊z/f⌋) sorted by the key b·MxMyMz + x'·MyMz + y'·Mz + z' (M_a = max coarse
/// coordinate + 1 over all rows), i.e. lexicographically; resolution R/f
/// (f must divide R). The batch size is kept (samples may become empty).
Result<CoordSet> coarsen(const CoordSet &fine, int64_t factor = 2);

/// For every row of `fine`, the row of `coarse` holding its parent
/// (b, ⌊x/f⌋, ⌊y/f⌋, ⌊z/f⌋), f = fine.resolution / coarse.resolution:
/// int32 [N]. Fails if a parent is missing.
Result<HostTensor> parentRows(const CoordSet &fine, const CoordSet &coarse);

/// trellis.sparse.parent_neighbor_map: `neighborMap` (int32 [N, k³] of `fine`)
/// with every active entry q replaced by parentRows(fine, coarse)[q].
Result<HostTensor> parentNeighborMap(const HostTensor &neighborMap,
                                     const CoordSet &coarse,
                                     const CoordSet &fine);

/// trellis.sparse.downsample (§6.3 step 3) [quirk]: feats [N, C] on `fine`
/// -> [N', C] on `coarse` (= coarsen(fine)); coarse row r gets
/// Σ_{children} feats / (n_children + 1), PyTorch's scatter_reduce "mean"
/// with include_self on zeros. Sums in f32, children in ascending row order.
Result<HostTensor> sparseDownsample(const HostTensor &feats,
                                    const CoordSet &fine,
                                    const CoordSet &coarse);

/// trellis.sparse.child_rows: the children of each coarse row as CSR,
/// offsets int32 [N' + 1] and children int32 [N] (ascending fine rows).
Result<std::pair<HostTensor, HostTensor>> childRows(const CoordSet &fine,
                                                    const CoordSet &coarse);

/// trellis.segment_mean: out[s] = Σ_{j in [offsets[s], offsets[s+1])}
/// x[rows[j]] / (n_s + extraCount), summed in f32 in ascending j order.
Result<HostTensor> segmentMean(const HostTensor &x, const HostTensor &offsets,
                               const HostTensor &rows, int64_t extraCount);

/// trellis.gather_rows: out[n] = x[index[n]] (whole rows, any dtype).
Result<HostTensor> gatherRows(const HostTensor &x, const HostTensor &index);

/// trellis.sparse.batch_index: the int32 [N] batch column.
HostTensor batchIndex(const CoordSet &coords);

/// trellis.sparse.upsample: feats [N', C] on `coarse` -> [N, C] on `fine`,
/// every fine row a copy of its parent's row.
Result<HostTensor> sparseUpsample(const HostTensor &coarseFeats,
                                  const CoordSet &coarse, const CoordSet &fine);

/// trellis.sparse.subdivide coords (§7.4): every voxel becomes its 8
/// children (b, 2x+δx, 2y+δy, 2z+δz), parent-major, δz fastest; resolution 2R.
Result<CoordSet> subdivideCoords(const CoordSet &coords);

/// trellis.sparse.subdivide feats: every row repeated 8 times in place.
Result<HostTensor> subdivideFeats(const HostTensor &feats);

/// trellis.sparse.group_norm (§7.4): per sample, each of `groups` groups of
/// C/groups channels normalized over (its channels × that sample's rows),
/// biased variance, then the per-channel affine (γ, β [C], optional).
Result<HostTensor> sparseGroupNorm(const HostTensor &feats,
                                   const CoordSet &coords, int64_t groups,
                                   float eps, const HostTensor *gamma = nullptr,
                                   const HostTensor *beta = nullptr);

/// trellis.sparse.batch_broadcast: v [B, C] -> [N, C], row n gets v[b(n)].
Result<HostTensor> batchBroadcast(const HostTensor &v, const CoordSet &coords);

/// trellis.sparse.xyz: the int32 [N, 3] coordinate columns (for the APE).
HostTensor xyz(const CoordSet &coords);

/// Attention groups (`!trellis.segments`): segment s holds the rows
/// rows[offsets[s] .. offsets[s+1]); every row appears in exactly one.
struct Segments {
  HostTensor rows;    ///< int32 [N], a permutation of 0..N-1
  HostTensor offsets; ///< int32 [S + 1]
  int64_t numSegments() const { return offsets.dim(0) - 1; }
};

/// trellis.sparse.batch_segments: one segment per sample (empty ones kept).
Segments batchSegments(const CoordSet &coords);

/// trellis.sparse.window_segments (§7.1): shift every coordinate by +shift
/// (no wrap), window W_a = ⌊c'_a/w⌋, n_a = ⌈(max over ALL rows of c'_a + 1)/w⌉,
/// id = b·nx·ny·nz + Wx·ny·nz + Wy·nz + Wz; one segment per non-empty window
/// in ascending id, rows ascending inside a window.
Result<Segments> windowSegments(const CoordSet &coords, int64_t window,
                                int64_t shift);

/// The window grid of windowSegments (§7.1 step 2): n_a = ⌈(max over all rows
/// of c_a + shift + 1) / window⌉ for a = x, y, z (0 for no rows).
std::array<int64_t, 3> windowGrid(const CoordSet &coords, int64_t window,
                                  int64_t shift);

/// trellis.sparse.attention: q [N, H, d], k [N, H, d], v [N, H, dv]; every
/// row attends to the rows of its segment; out [N, H, dv] in row order.
Result<HostTensor> sparseAttention(const HostTensor &q, const HostTensor &k,
                                   const HostTensor &v,
                                   const Segments &segments, float scale);

/// trellis.sparse.attention with precision = "fp8_e4m3": attentionFp8's
/// math (one implementation) with the segments as the sequences: q, k, v
/// [N, H, 64], qGamma, kGamma [H, 64]; segment s's keys are its rows in
/// segment order (the "first 64 keys" of ref_i are that order's first 64),
/// v_amax is over all N rows. Out [N, H, 64] in row order. A dense op of
/// equal-length sequences and this op on the same rows agree bit for bit.
Result<HostTensor> sparseAttentionFp8(const HostTensor &q, const HostTensor &k,
                                      const HostTensor &v,
                                      const Segments &segments,
                                      const HostTensor &qGamma,
                                      const HostTensor &kGamma, float scale,
                                      std::span<const float> vAmax = {});

/// trellis.sparse.cross_attention (§6.5): q [N, H, d] rows; k [B, Lc, H, d],
/// v [B, Lc, H, dv]; each row attends to its own sample's Lc tokens.
Result<HostTensor> sparseCrossAttention(const HostTensor &q,
                                        const HostTensor &k,
                                        const HostTensor &v,
                                        const CoordSet &coords, float scale);

/// Result of uniqueMean.
struct UniqueMean {
  HostTensor keys;  ///< int64 [U], ascending
  HostTensor means; ///< [U, C], values' dtype
};

/// trellis.unique_mean (§7.4 step 2): sorted unique keys and the TRUE mean
/// (include_self = False) of the value rows sharing each key.
Result<UniqueMean> uniqueMean(const HostTensor &keys, const HostTensor &values);

} // namespace trellis::ref

#endif // TRELLIS_REFERENCE_KERNELS_H
