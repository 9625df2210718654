//===- Ops.h - Functional ops of the C++ tracing API ------------*- C++ -*-===//
//
// One function per trellis op, Python-style: `y = linear(x, w, b)`. Each
// takes the caller's source line as its last (defaulted) argument, which
// becomes the "builder" part of the op's location. If an input is absent
// (an earlier op failed and recorded its error), the result is absent too.
// The semantics of each op are those of the dialect op of the same name
// (dialect/TrellisOps.td, generated reference TrellisOps.md).
//
// Sparse values (coordinate sets, neighbour maps, segments) are Tensors too:
// handles of SSA values of the dialect's own types.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_TRACE_OPS_H
#define TRELLIS_TRACE_OPS_H

#include "trellis/Trace/Tracer.h"

#include <functional>

namespace trellis::trace {

using Where = std::source_location;

//===----------------------------------------------------------------------===//
// Constants, casts, calls
//===----------------------------------------------------------------------===//

/// A small constant tensor (e.g. the SLat normalization vectors).
Tensor constant(Tracer &t, const HostTensor &value,
                Where where = Where::current());
/// Element type conversion (f16 <-> f32, i32 -> f32).
Tensor cast(const Tensor &x, DType to, Where where = Where::current());
/// Calls function `callee` of the module (traced before) on `args`.
std::vector<Tensor> call(Tracer &t, const std::string &callee,
                         const std::vector<Tensor> &args,
                         Where where = Where::current());

//===----------------------------------------------------------------------===//
// Dense
//===----------------------------------------------------------------------===//

/// y = x·Wᵀ + b over the last dimension (b optional).
Tensor linear(const Tensor &x, const Tensor &w, const Tensor &b = Tensor(),
              Where where = Where::current());
/// NumPy matmul.
Tensor matmul(const Tensor &a, const Tensor &b, Where where = Where::current());

// Elementwise with NumPy broadcasting.
Tensor add(const Tensor &a, const Tensor &b, Where where = Where::current());
Tensor sub(const Tensor &a, const Tensor &b, Where where = Where::current());
Tensor mul(const Tensor &a, const Tensor &b, Where where = Where::current());
Tensor div(const Tensor &a, const Tensor &b, Where where = Where::current());
Tensor maximum(const Tensor &a, const Tensor &b,
               Where where = Where::current());
/// a^b (float; C's powf).
Tensor pow(const Tensor &a, const Tensor &b, Where where = Where::current());
// Comparisons: 1 where they hold, else 0, in the operands' type.
Tensor greater(const Tensor &a, const Tensor &b,
               Where where = Where::current());
Tensor less(const Tensor &a, const Tensor &b, Where where = Where::current());
Tensor equal(const Tensor &a, const Tensor &b, Where where = Where::current());
/// cond ≠ 0 ? a : b (float; the three shapes broadcast).
Tensor where(const Tensor &cond, const Tensor &a, const Tensor &b,
             Where where = Where::current());

// Elementwise unary (f32 math, result in the operand's type).
Tensor silu(const Tensor &x, Where where = Where::current());
/// GELU, tanh approximation (TRELLIS's everywhere).
Tensor gelu(const Tensor &x, Where where = Where::current());
/// GELU, exact erf form (DINOv2's MLP).
Tensor geluErf(const Tensor &x, Where where = Where::current());
Tensor sigmoid(const Tensor &x, Where where = Where::current());
Tensor tanh(const Tensor &x, Where where = Where::current());
Tensor softplus(const Tensor &x, Where where = Where::current());
Tensor atanh(const Tensor &x, Where where = Where::current());
Tensor exp(const Tensor &x, Where where = Where::current());
Tensor log(const Tensor &x, Where where = Where::current());
Tensor sin(const Tensor &x, Where where = Where::current());
Tensor cos(const Tensor &x, Where where = Where::current());
Tensor neg(const Tensor &x, Where where = Where::current());
Tensor sqrt(const Tensor &x, Where where = Where::current());
Tensor abs(const Tensor &x, Where where = Where::current());

/// LayerNorm over `axis` (biased variance, f32 statistics); weight/bias
/// (f32 [C]) optional, together.
Tensor layerNorm(const Tensor &x, const Tensor &weight, const Tensor &bias,
                 double eps, int64_t axis = -1, Where where = Where::current());
/// Per-head L2 normalization ·γ·√d (TRELLIS's "RMS norm"), x [..., H, d].
Tensor headRmsNorm(const Tensor &x, const Tensor &gamma,
                   Where where = Where::current());
Tensor softmax(const Tensor &x, int64_t axis, Where where = Where::current());
/// "sum", "mean" or "max" over `axis` (f32 accumulation), the axis dropped
/// or (keepdim) kept with size 1.
Tensor reduce(const Tensor &x, const std::string &kind, int64_t axis,
              bool keepdim, Where where = Where::current());
/// Rows of x picked by an i32 index [N]: out[i] = x[index[i]] (an embedding
/// lookup).
Tensor gatherRows(const Tensor &x, const Tensor &index,
                  Where where = Where::current());
/// The head RMS norms of a self-attention's q and k (headRmsNorm's gains
/// [H, d]), given to attention() / sparseAttention() instead of applied first.
struct HeadNorms {
  Tensor qGamma, kGamma;
};
/// softmax(q·kᵀ·scale)·v, token-major [B, L, H, d]. With `norms`, q and k
/// are head-RMS-normalized first: as two headRmsNorm ops, or — traced in a
/// Tracer::QuantizeFp8 scope with head dim 64 and f16 operands — fused into
/// the op (q_gamma, k_gamma), which then runs in FP8 (precision =
/// "fp8_e4m3": its scales come from the gains, so the op carries them on
/// every target).
Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 double scale, const HeadNorms *norms = nullptr,
                 Where where = Where::current());
/// x·(1 + scale) + shift.
Tensor modulate(const Tensor &x, const Tensor &shift, const Tensor &scale,
                Where where = Where::current());
/// x + gate·h.
Tensor gatedResidual(const Tensor &x, const Tensor &h, const Tensor &gate,
                     Where where = Where::current());
/// [cos(τf), sin(τf)] of τ [B] (already ×1000), dim values.
Tensor timestepEmbedding(const Tensor &tau, int64_t dim = 256,
                         double maxPeriod = 10000.0,
                         Where where = Where::current());
/// Absolute position embedding of integer positions [L, 3].
Tensor ape(const Tensor &pos, int64_t channels, Where where = Where::current());
/// Dense 3-D convolution (NCDHW, stride 1, zero padding).
Tensor conv3d(const Tensor &x, const Tensor &w, const Tensor &b,
              int64_t padding = 1, Where where = Where::current());
Tensor pixelShuffle3d(const Tensor &x, int64_t factor = 2,
                      Where where = Where::current());
/// Reshape to `shape` (ShapedType::kDynamic keeps a bounded dim).
Tensor reshape(const Tensor &x, const Shape &shape,
               Where where = Where::current());
Tensor permute(const Tensor &x, const std::vector<int64_t> &perm,
               Where where = Where::current());
Tensor concat(const std::vector<Tensor> &xs, int64_t axis,
              Where where = Where::current());
std::vector<Tensor> split(const Tensor &x, int64_t axis,
                          const std::vector<int64_t> &sizes,
                          Where where = Where::current());
/// Coordinates (b, x, y, z) of logits > 0: logits [B, 1, R, R, R].
Tensor occupancy(const Tensor &logits, Where where = Where::current());

//===----------------------------------------------------------------------===//
// Sampler
//===----------------------------------------------------------------------===//

struct SamplerSettings {
  int64_t steps = 25;
  double rescaleT = 3.0;
  double sigmaMin = 1e-5;
  double cfgStrength = 5.0;
  double cfgIntervalLo = 0.5, cfgIntervalHi = 1.0;
  std::string multiImage = "none"; // none | stochastic | multidiffusion
};

/// The velocity model: (x_t, τ [B], cond) -> v (x's type).
using VelocityFn =
    std::function<Tensor(const Tensor &x, const Tensor &tau, const Tensor &c)>;

/// Euler flow sampling with classifier-free guidance on an interval. The
/// velocity model is traced once, as the op's body, for model batch `batch`.
Tensor flowSample(const Tensor &noise, const Tensor &cond,
                  const Tensor &negCond, const SamplerSettings &settings,
                  int64_t batch, const VelocityFn &velocity,
                  Where where = Where::current());

//===----------------------------------------------------------------------===//
// Sparse
//===----------------------------------------------------------------------===//

Tensor neighborMap(const Tensor &coords, int64_t kernel = 3,
                   Where where = Where::current());
/// Submanifold conv: weight [O, k, k, k, I]; k = 3 needs `nbmap`.
Tensor sparseConv3d(const Tensor &feats, const Tensor &w, const Tensor &b,
                    const Tensor &nbmap, Where where = Where::current());
Tensor coarsen(const Tensor &coords, int64_t factor = 2,
               Where where = Where::current());
Tensor downsample(const Tensor &feats, const Tensor &fine, const Tensor &coarse,
                  Where where = Where::current());
Tensor upsample(const Tensor &feats, const Tensor &coarse, const Tensor &fine,
                Where where = Where::current());
Tensor subdivide(const Tensor &coords, Where where = Where::current());
Tensor subdivideFeatures(const Tensor &feats, Where where = Where::current());
Tensor sparseGroupNorm(const Tensor &feats, const Tensor &coords,
                       const Tensor &weight, const Tensor &bias, int64_t groups,
                       double eps, Where where = Where::current());
/// [B, C] per-sample vectors to the rows of `coords`.
Tensor batchBroadcast(const Tensor &values, const Tensor &coords,
                      Where where = Where::current());
/// The spatial columns (x, y, z) of the coordinates, [N, 3] i32.
Tensor xyz(const Tensor &coords, Where where = Where::current());
Tensor coordsToTensor(const Tensor &coords, Where where = Where::current());
Tensor coordsFromTensor(const Tensor &t, int64_t resolution,
                        Where where = Where::current());
Tensor batchSegments(const Tensor &coords, Where where = Where::current());
Tensor windowSegments(const Tensor &coords, int64_t window, int64_t shift,
                      Where where = Where::current());
/// Attention within segments; q, k, v [N, H, d]. `norms` as for
/// attention().
Tensor sparseAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                       const Tensor &segments, double scale,
                       const HeadNorms *norms = nullptr,
                       Where where = Where::current());
/// Rows attend to their own sample's context k, v [B, Lc, H, d].
Tensor sparseCrossAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                            const Tensor &coords, double scale,
                            Where where = Where::current());

} // namespace trellis::trace

#endif // TRELLIS_TRACE_OPS_H
