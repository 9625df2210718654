//===- Ops.cpp - Functional ops of the C++ tracing API --------------------===//
//
// Thin wrappers: check that inputs are present, turn C++ values into MLIR
// attributes, and let Tracer::create build, infer and verify the op.
//
//===----------------------------------------------------------------------===//
#include "trellis/Trace/Ops.h"

#include "dialect/TrellisOps.h"

#include "mlir/IR/BuiltinAttributes.h"

namespace trellis::trace {

namespace td = mlir::trellis;
using mlir::Value;

namespace {

/// The single result of an op traced with inferred types.
template <typename OpTy, typename... Args>
Tensor inferred(Tracer &t, Where where, Args &&...args) {
  auto results =
      t.create<OpTy>(where, mlir::TypeRange{}, std::forward<Args>(args)...);
  return results.empty() ? Tensor() : results.front();
}

/// An op whose result type is its operand's.
template <typename OpTy> Tensor sameType(const Tensor &x, Where where) {
  if (Tracer::anyAbsent({x}))
    return Tensor();
  return x.tracer()
      .create<OpTy>(where, mlir::TypeRange{x.type()}, x.value())
      .front();
}

Value valueOr(const Tensor &t) { return t ? t.value() : Value(); }

mlir::FloatAttr f64(Tracer &t, double v) {
  return t.builder().getF64FloatAttr(v);
}
mlir::IntegerAttr i64(Tracer &t, int64_t v) {
  return t.builder().getI64IntegerAttr(v);
}

/// Whether a self-attention with head norms runs in FP8: traced in a
/// QuantizeFp8 scope, f16, head dim 64.
bool fp8Attention(const Tensor &q, const HeadNorms *norms) {
  return norms && q.tracer().fp8Active() && q.elementType().isF16() &&
         q.shape().back() == 64;
}

/// The operands of a self-attention with `norms`: FP8 — q, k as they are
/// and the gains (the op normalizes); else q, k normalized by headRmsNorm
/// ops and no gains.
struct AttentionOperands {
  Tensor q, k;
  Value qGamma, kGamma;
  mlir::StringAttr precision;
};
AttentionOperands attentionOperands(const Tensor &q, const Tensor &k,
                                    const HeadNorms *norms, Where where) {
  if (!norms)
    return {q, k, Value(), Value(), mlir::StringAttr()};
  if (fp8Attention(q, norms))
    return {q, k, norms->qGamma.value(), norms->kGamma.value(),
            q.tracer().builder().getStringAttr("fp8_e4m3")};
  return {headRmsNorm(q, norms->qGamma, where),
          headRmsNorm(k, norms->kGamma, where), Value(), Value(),
          mlir::StringAttr()};
}

} // namespace

//===----------------------------------------------------------------------===//
// Constants, casts, calls
//===----------------------------------------------------------------------===//

Tensor constant(Tracer &t, const HostTensor &value, Where where) {
  auto type = t.tensorType(value.shape(), value.dtype());
  HostTensor f = value.toFloat32();
  mlir::DenseElementsAttr attr;
  if (value.dtype() == DType::I32) {
    llvm::ArrayRef<int32_t> data(value.data<int32_t>(), value.numel());
    attr = mlir::DenseElementsAttr::get(type, data);
  } else if (value.dtype() == DType::F32) {
    llvm::ArrayRef<float> data(value.data<float>(), value.numel());
    attr = mlir::DenseElementsAttr::get(type, data);
  } else {
    t.error("constants must be f32 or i32, found " +
                std::string(dtypeName(value.dtype())),
            where);
    return Tensor();
  }
  return t.create<td::ConstantOp>(where, mlir::TypeRange{type}, attr).front();
}

Tensor cast(const Tensor &x, DType to, Where where) {
  if (Tracer::anyAbsent({x}))
    return Tensor();
  if (to == DType::F16 && x.tracer().allFp32())
    return x; // all-f32 debug mode: no fp16 storage points
  if (x.elementType() == x.tracer().elementType(to))
    return x; // already of that type
  auto from = llvm::cast<mlir::RankedTensorType>(x.type());
  auto type = from.clone(x.tracer().elementType(to));
  return x.tracer()
      .create<td::CastOp>(where, mlir::TypeRange{type}, x.value())
      .front();
}

std::vector<Tensor> call(Tracer &t, const std::string &callee,
                         const std::vector<Tensor> &args, Where where) {
  auto fn = t.module().lookupSymbol<mlir::func::FuncOp>(callee);
  if (!fn) {
    t.error("call to '" + callee + "', which was not traced", where);
    return {};
  }
  llvm::SmallVector<Value> operands;
  for (const Tensor &a : args) {
    if (!a)
      return {};
    operands.push_back(a.value());
  }
  auto results = t.create<mlir::func::CallOp>(
      where, fn.getFunctionType().getResults(), callee, operands);
  return std::vector<Tensor>(results.begin(), results.end());
}

//===----------------------------------------------------------------------===//
// Dense
//===----------------------------------------------------------------------===//

Tensor linear(const Tensor &x, const Tensor &w, const Tensor &b, Where where) {
  if (Tracer::anyAbsent({x, w}))
    return Tensor();
  Tracer &t = x.tracer();
  mlir::StringAttr precision;
  if (t.tf32Allowed() && x.elementType().isF32())
    precision = t.builder().getStringAttr("tf32");
  else if (t.fp8Active() && x.elementType().isF16())
    precision = t.builder().getStringAttr("fp8_e4m3");
  return inferred<td::LinearOp>(t, where, x.value(), w.value(), valueOr(b),
                                /*residual=*/Value(),
                                /*activation=*/mlir::StringAttr(), precision,
                                /*activation_amax=*/mlir::FloatAttr());
}

Tensor matmul(const Tensor &a, const Tensor &b, Where where) {
  if (Tracer::anyAbsent({a, b}))
    return Tensor();
  return inferred<td::MatmulOp>(a.tracer(), where, a.value(), b.value());
}

#define TRELLIS_BINARY(FN, OP)                                                 \
  Tensor FN(const Tensor &a, const Tensor &b, Where where) {                   \
    if (Tracer::anyAbsent({a, b}))                                             \
      return Tensor();                                                         \
    return inferred<td::OP>(a.tracer(), where, a.value(), b.value());          \
  }
TRELLIS_BINARY(add, AddOp)
TRELLIS_BINARY(sub, SubOp)
TRELLIS_BINARY(mul, MulOp)
TRELLIS_BINARY(div, DivOp)
TRELLIS_BINARY(maximum, MaximumOp)
TRELLIS_BINARY(pow, PowOp)
TRELLIS_BINARY(greater, GreaterOp)
TRELLIS_BINARY(less, LessOp)
TRELLIS_BINARY(equal, EqualOp)

Tensor where(const Tensor &cond, const Tensor &a, const Tensor &b,
             Where where) {
  if (Tracer::anyAbsent({cond, a, b}))
    return Tensor();
  return inferred<td::WhereOp>(cond.tracer(), where, cond.value(), a.value(),
                               b.value());
}
#undef TRELLIS_BINARY

#define TRELLIS_UNARY(FN, OP)                                                  \
  Tensor FN(const Tensor &x, Where where) { return sameType<td::OP>(x, where); }
TRELLIS_UNARY(silu, SiluOp)
TRELLIS_UNARY(gelu, GeluOp)
TRELLIS_UNARY(geluErf, GeluErfOp)
TRELLIS_UNARY(sigmoid, SigmoidOp)
TRELLIS_UNARY(tanh, TanhOp)
TRELLIS_UNARY(softplus, SoftplusOp)
TRELLIS_UNARY(atanh, AtanhOp)
TRELLIS_UNARY(exp, ExpOp)
TRELLIS_UNARY(log, LogOp)
TRELLIS_UNARY(sin, SinOp)
TRELLIS_UNARY(cos, CosOp)
TRELLIS_UNARY(neg, NegOp)
TRELLIS_UNARY(sqrt, SqrtOp)
TRELLIS_UNARY(abs, AbsOp)
#undef TRELLIS_UNARY

Tensor layerNorm(const Tensor &x, const Tensor &weight, const Tensor &bias,
                 double eps, int64_t axis, Where where) {
  if (Tracer::anyAbsent({x}))
    return Tensor();
  Tracer &t = x.tracer();
  return inferred<td::LayerNormOp>(t, where, x.value(), valueOr(weight),
                                   valueOr(bias), f64(t, eps), i64(t, axis));
}

Tensor headRmsNorm(const Tensor &x, const Tensor &gamma, Where where) {
  if (Tracer::anyAbsent({x, gamma}))
    return Tensor();
  return inferred<td::HeadRmsNormOp>(x.tracer(), where, x.value(),
                                     gamma.value());
}

Tensor softmax(const Tensor &x, int64_t axis, Where where) {
  if (Tracer::anyAbsent({x}))
    return Tensor();
  return inferred<td::SoftmaxOp>(x.tracer(), where, x.value(),
                                 i64(x.tracer(), axis));
}

Tensor reduce(const Tensor &x, const std::string &kind, int64_t axis,
              bool keepdim, Where where) {
  if (Tracer::anyAbsent({x}))
    return Tensor();
  Tracer &t = x.tracer();
  return inferred<td::ReduceOp>(t, where, x.value(),
                                t.builder().getStringAttr(kind), i64(t, axis),
                                t.builder().getBoolAttr(keepdim));
}

Tensor gatherRows(const Tensor &x, const Tensor &index, Where where) {
  if (Tracer::anyAbsent({x, index}))
    return Tensor();
  return inferred<td::GatherRowsOp>(x.tracer(), where, x.value(),
                                    index.value());
}

Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 double scale, const HeadNorms *norms, Where where) {
  if (Tracer::anyAbsent({q, k, v}) ||
      (norms && Tracer::anyAbsent({norms->qGamma, norms->kGamma})))
    return Tensor();
  Tracer &t = q.tracer();
  AttentionOperands a = attentionOperands(q, k, norms, where);
  if (Tracer::anyAbsent({a.q, a.k}))
    return Tensor();
  return inferred<td::AttentionOp>(t, where, a.q.value(), a.k.value(),
                                   v.value(), a.qGamma, a.kGamma, f64(t, scale),
                                   /*tiles=*/mlir::ArrayAttr(), a.precision,
                                   /*v_amax=*/mlir::DenseF32ArrayAttr());
}

Tensor modulate(const Tensor &x, const Tensor &shift, const Tensor &scale,
                Where where) {
  if (Tracer::anyAbsent({x, shift, scale}))
    return Tensor();
  return inferred<td::ModulateOp>(x.tracer(), where, x.value(), shift.value(),
                                  scale.value());
}

Tensor gatedResidual(const Tensor &x, const Tensor &h, const Tensor &gate,
                     Where where) {
  if (Tracer::anyAbsent({x, h, gate}))
    return Tensor();
  return inferred<td::GatedResidualOp>(x.tracer(), where, x.value(), h.value(),
                                       gate.value());
}

Tensor timestepEmbedding(const Tensor &tau, int64_t dim, double maxPeriod,
                         Where where) {
  if (Tracer::anyAbsent({tau}))
    return Tensor();
  Tracer &t = tau.tracer();
  return inferred<td::TimestepEmbeddingOp>(t, where, tau.value(), i64(t, dim),
                                           f64(t, maxPeriod));
}

Tensor ape(const Tensor &pos, int64_t channels, Where where) {
  if (Tracer::anyAbsent({pos}))
    return Tensor();
  return inferred<td::ApeOp>(pos.tracer(), where, pos.value(),
                             i64(pos.tracer(), channels));
}

Tensor conv3d(const Tensor &x, const Tensor &w, const Tensor &b,
              int64_t padding, Where where) {
  if (Tracer::anyAbsent({x, w}))
    return Tensor();
  return inferred<td::Conv3dOp>(x.tracer(), where, x.value(), w.value(),
                                valueOr(b), i64(x.tracer(), padding));
}

Tensor pixelShuffle3d(const Tensor &x, int64_t factor, Where where) {
  if (Tracer::anyAbsent({x}))
    return Tensor();
  return inferred<td::PixelShuffle3dOp>(x.tracer(), where, x.value(),
                                        i64(x.tracer(), factor));
}

Tensor reshape(const Tensor &x, const Shape &shape, Where where) {
  if (Tracer::anyAbsent({x}))
    return Tensor();
  Tracer &t = x.tracer();
  auto from = llvm::cast<mlir::RankedTensorType>(x.type());
  // A dynamic target dim gets the bound that the element count allows.
  llvm::SmallVector<int64_t> bounds;
  int64_t maxElements = 1, staticProduct = 1;
  for (unsigned i = 0; i < from.getRank(); ++i)
    maxElements *= td::getDimUpperBound(from, i);
  for (int64_t d : shape)
    if (!mlir::ShapedType::isDynamic(d))
      staticProduct *= d;
  for (int64_t d : shape)
    if (mlir::ShapedType::isDynamic(d))
      bounds.push_back(staticProduct ? maxElements / staticProduct : 1);
  auto type = td::getBoundedTensorType(shape, from.getElementType(), bounds);
  return t.create<td::ReshapeOp>(where, mlir::TypeRange{type}, x.value())
      .front();
}

Tensor permute(const Tensor &x, const std::vector<int64_t> &perm, Where where) {
  if (Tracer::anyAbsent({x}))
    return Tensor();
  return inferred<td::PermuteOp>(
      x.tracer(), where, x.value(),
      x.tracer().builder().getDenseI64ArrayAttr(perm));
}

Tensor concat(const std::vector<Tensor> &xs, int64_t axis, Where where) {
  llvm::SmallVector<Value> values;
  for (const Tensor &x : xs) {
    if (!x)
      return Tensor();
    values.push_back(x.value());
  }
  if (values.empty())
    return Tensor();
  Tracer &t = xs.front().tracer();
  return inferred<td::ConcatOp>(t, where, mlir::ValueRange(values),
                                i64(t, axis));
}

std::vector<Tensor> split(const Tensor &x, int64_t axis,
                          const std::vector<int64_t> &sizes, Where where) {
  if (Tracer::anyAbsent({x}))
    return {};
  Tracer &t = x.tracer();
  auto results =
      t.create<td::SplitOp>(where, mlir::TypeRange{}, x.value(), i64(t, axis),
                            t.builder().getDenseI64ArrayAttr(sizes));
  return std::vector<Tensor>(results.begin(), results.end());
}

Tensor occupancy(const Tensor &logits, Where where) {
  if (Tracer::anyAbsent({logits}))
    return Tensor();
  return inferred<td::OccupancyOp>(logits.tracer(), where, logits.value());
}

//===----------------------------------------------------------------------===//
// Sampler
//===----------------------------------------------------------------------===//

Tensor flowSample(const Tensor &noise, const Tensor &cond,
                  const Tensor &negCond, const SamplerSettings &settings,
                  int64_t batch, const VelocityFn &velocity, Where where) {
  if (Tracer::anyAbsent({noise, cond, negCond}))
    return Tensor();
  Tracer &t = noise.tracer();
  auto mode = td::symbolizeMultiImageMode(settings.multiImage);
  if (!mode) {
    t.error("unknown multi-image mode '" + settings.multiImage +
                "' (expected none, stochastic or multidiffusion)",
            where);
    return Tensor();
  }
  auto condType = llvm::cast<mlir::RankedTensorType>(cond.type());
  llvm::SmallVector<int64_t> cShape(condType.getShape());
  cShape[0] = batch;
  mlir::Type blockArgs[] = {
      noise.type(), t.tensorType({batch}, DType::F32),
      mlir::RankedTensorType::get(cShape, condType.getElementType())};
  auto fill = [&](mlir::Block &body) {
    Tensor v = velocity(Tensor(&t, body.getArgument(0)),
                        Tensor(&t, body.getArgument(1)),
                        Tensor(&t, body.getArgument(2)));
    if (v)
      t.create<td::YieldOp>(where, mlir::TypeRange{}, v.value());
  };
  auto results = t.createWithRegion<td::FlowSampleOp>(
      where, blockArgs, fill, noise.value(), cond.value(), negCond.value(),
      i64(t, settings.steps), f64(t, settings.rescaleT),
      f64(t, settings.sigmaMin), f64(t, settings.cfgStrength),
      t.builder().getDenseF64ArrayAttr(
          {settings.cfgIntervalLo, settings.cfgIntervalHi}),
      td::MultiImageModeAttr::get(&t.context(), *mode));
  return results.empty() ? Tensor() : results.front();
}

//===----------------------------------------------------------------------===//
// Sparse
//===----------------------------------------------------------------------===//

Tensor neighborMap(const Tensor &coords, int64_t kernel, Where where) {
  if (Tracer::anyAbsent({coords}))
    return Tensor();
  return inferred<td::SparseNeighborMapOp>(
      coords.tracer(), where, coords.value(), i64(coords.tracer(), kernel));
}

Tensor sparseConv3d(const Tensor &feats, const Tensor &w, const Tensor &b,
                    const Tensor &nbmap, Where where) {
  if (Tracer::anyAbsent({feats, w}))
    return Tensor();
  return inferred<td::SparseConv3dOp>(feats.tracer(), where, feats.value(),
                                      w.value(), valueOr(b), valueOr(nbmap));
}

Tensor coarsen(const Tensor &coords, int64_t factor, Where where) {
  if (Tracer::anyAbsent({coords}))
    return Tensor();
  return inferred<td::SparseCoarsenOp>(coords.tracer(), where, coords.value(),
                                       i64(coords.tracer(), factor));
}

Tensor downsample(const Tensor &feats, const Tensor &fine, const Tensor &coarse,
                  Where where) {
  if (Tracer::anyAbsent({feats, fine, coarse}))
    return Tensor();
  return inferred<td::SparseDownsampleOp>(feats.tracer(), where, feats.value(),
                                          fine.value(), coarse.value());
}

Tensor upsample(const Tensor &feats, const Tensor &coarse, const Tensor &fine,
                Where where) {
  if (Tracer::anyAbsent({feats, coarse, fine}))
    return Tensor();
  return inferred<td::SparseUpsampleOp>(feats.tracer(), where, feats.value(),
                                        coarse.value(), fine.value());
}

Tensor subdivide(const Tensor &coords, Where where) {
  if (Tracer::anyAbsent({coords}))
    return Tensor();
  return inferred<td::SparseSubdivideOp>(coords.tracer(), where,
                                         coords.value());
}

Tensor subdivideFeatures(const Tensor &feats, Where where) {
  if (Tracer::anyAbsent({feats}))
    return Tensor();
  return inferred<td::SparseSubdivideFeaturesOp>(feats.tracer(), where,
                                                 feats.value());
}

Tensor sparseGroupNorm(const Tensor &feats, const Tensor &coords,
                       const Tensor &weight, const Tensor &bias, int64_t groups,
                       double eps, Where where) {
  if (Tracer::anyAbsent({feats, coords, weight, bias}))
    return Tensor();
  Tracer &t = feats.tracer();
  return inferred<td::SparseGroupNormOp>(
      t, where, feats.value(), coords.value(), weight.value(), bias.value(),
      i64(t, groups), f64(t, eps));
}

Tensor batchBroadcast(const Tensor &values, const Tensor &coords, Where where) {
  if (Tracer::anyAbsent({values, coords}))
    return Tensor();
  return inferred<td::SparseBatchBroadcastOp>(values.tracer(), where,
                                              values.value(), coords.value());
}

Tensor xyz(const Tensor &coords, Where where) {
  if (Tracer::anyAbsent({coords}))
    return Tensor();
  return inferred<td::SparseXyzOp>(coords.tracer(), where, coords.value());
}

Tensor coordsToTensor(const Tensor &coords, Where where) {
  if (Tracer::anyAbsent({coords}))
    return Tensor();
  return inferred<td::SparseToTensorOp>(coords.tracer(), where, coords.value());
}

Tensor coordsFromTensor(const Tensor &t, int64_t resolution, Where where) {
  if (Tracer::anyAbsent({t}))
    return Tensor();
  return inferred<td::SparseFromTensorOp>(t.tracer(), where, t.value(),
                                          i64(t.tracer(), resolution));
}

Tensor batchSegments(const Tensor &coords, Where where) {
  if (Tracer::anyAbsent({coords}))
    return Tensor();
  return inferred<td::SparseBatchSegmentsOp>(coords.tracer(), where,
                                             coords.value());
}

Tensor windowSegments(const Tensor &coords, int64_t window, int64_t shift,
                      Where where) {
  if (Tracer::anyAbsent({coords}))
    return Tensor();
  Tracer &t = coords.tracer();
  return inferred<td::SparseWindowSegmentsOp>(t, where, coords.value(),
                                              i64(t, window), i64(t, shift));
}

Tensor sparseAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                       const Tensor &segments, double scale,
                       const HeadNorms *norms, Where where) {
  if (Tracer::anyAbsent({q, k, v, segments}) ||
      (norms && Tracer::anyAbsent({norms->qGamma, norms->kGamma})))
    return Tensor();
  Tracer &t = q.tracer();
  AttentionOperands a = attentionOperands(q, k, norms, where);
  if (Tracer::anyAbsent({a.q, a.k}))
    return Tensor();
  return inferred<td::SparseAttentionOp>(
      t, where, a.q.value(), a.k.value(), v.value(), segments.value(), a.qGamma,
      a.kGamma, f64(t, scale), /*tiles=*/mlir::ArrayAttr(), a.precision,
      /*v_amax=*/mlir::DenseF32ArrayAttr());
}

Tensor sparseCrossAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                            const Tensor &coords, double scale, Where where) {
  if (Tracer::anyAbsent({q, k, v, coords}))
    return Tensor();
  Tracer &t = q.tracer();
  return inferred<td::SparseCrossAttentionOp>(
      t, where, q.value(), k.value(), v.value(), coords.value(), f64(t, scale));
}

} // namespace trellis::trace
