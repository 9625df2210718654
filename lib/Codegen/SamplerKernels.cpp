//===- SamplerKernels.cpp - The flow sampler's generated kernels ----------===//
//
// The Euler update of a trellis.flow_sample (CFG combine included), and the
// running sum of multidiffusion's per-image velocities.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/KernelFamilies.h"

namespace trellis::codegen::detail {

namespace {

/// The flat memref of the sample of `flow` and its row bound (0: static),
/// or an error naming the op when the GPU cannot hold it.
FailureOr<std::pair<MemRefType, int64_t>> sampleBuffer(Operation *flow) {
  Value noise = flow->getOperand(0);
  auto rt = dyn_cast<RankedTensorType>(noise.getType());
  // A static f32 tensor, or one with dynamic rows (dimension 0 only).
  int64_t bound = 0;
  if (rt && !rt.hasStaticShape()) {
    bound = addressableRows(rt);
    for (int64_t d = 1; d < rt.getRank(); ++d)
      if (rt.isDynamicDim(d))
        bound = ShapedType::kDynamic;
  }
  if (!rt || !rt.getElementType().isF32() || ShapedType::isDynamic(bound) ||
      product(boundShape(rt, bound)) > kMaxElements)
    return flow->emitError()
           << "has no GPU implementation of its update for the sample type "
           << noise.getType()
           << " (an f32 tensor, static or with bounded dynamic rows, is "
              "needed)";
  return std::make_pair(flatMemRef(rt, bound), bound);
}

} // namespace

FailureOr<Launch> emitFlowUpdateKernel(Operation *flow, gpu::GPUModuleOp module,
                                       StringRef name) {
  FailureOr<std::pair<MemRefType, int64_t>> sample = sampleBuffer(flow);
  if (failed(sample))
    return failure();
  auto [mt, bound] = *sample;
  auto rt = cast<RankedTensorType>(flow->getOperand(0).getType());
  Builder tb(flow->getContext());
  SmallVector<Type> args = {
      mt, mt, mt, mt, tb.getF32Type(), tb.getF32Type(), tb.getI32Type()};
  if (bound)
    args.push_back(tb.getI64Type());
  KernelBuilder kb(module, name, args, flow->getLoc());
  if (bound)
    kb.bindRows(7, bound);
  // Operands 0..2 are (x, v_cond, v_uncond); v_uncond is read only when
  // guided (it may be null otherwise).
  SmallVector<int64_t> shape = boundShape(rt, bound);
  EwOperand x{0, broadcastStrides(shape, shape)};
  EwOperand vc{1, broadcastStrides(shape, shape)};
  return emitElementwise(
      kb, shape, {x, vc}, 3, true,
      [&](KernelBuilder &k, ArrayRef<Value> v, Value flat) {
        OpBuilder &b = k.b;
        Location loc = k.loc;
        Type t = v[1].getType();
        int64_t width =
            isa<VectorType>(t) ? cast<VectorType>(t).getNumElements() : 1;
        Value w = k.splat(k.arg(4), width);
        Value dt = k.splat(k.arg(5), width);
        Value guided = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                             k.arg(6), k.i32(0));
        auto ifOp = scf::IfOp::create(b, loc, TypeRange{t}, guided,
                                      /*withElseRegion=*/true);
        {
          OpBuilder::InsertionGuard ig(b);
          b.setInsertionPointToStart(ifOp.thenBlock());
          // (1 + w)·vc − w·vu (ref::cfgCombine), w as f32.
          Value vu = k.load(k.arg(2), flat, width);
          Value a = arith::AddFOp::create(b, loc, k.f32(1, t), w);
          Value g = arith::SubFOp::create(
              b, loc, arith::MulFOp::create(b, loc, a, v[1]),
              arith::MulFOp::create(b, loc, w, vu));
          scf::YieldOp::create(b, loc, g);
          b.setInsertionPointToStart(ifOp.elseBlock());
          scf::YieldOp::create(b, loc, v[1]);
        }
        // x − dt·v (ref::eulerUpdate)
        return Value(arith::SubFOp::create(
            b, loc, v[0],
            arith::MulFOp::create(b, loc, dt, ifOp.getResult(0))));
      });
}

FailureOr<Launch> emitVelocitySumKernel(Operation *flow,
                                        gpu::GPUModuleOp module,
                                        StringRef name) {
  FailureOr<std::pair<MemRefType, int64_t>> sample = sampleBuffer(flow);
  if (failed(sample))
    return failure();
  auto [mt, bound] = *sample;
  auto rt = cast<RankedTensorType>(flow->getOperand(0).getType());
  Builder tb(flow->getContext());
  SmallVector<Type> args = {mt, mt, mt, tb.getF32Type()};
  if (bound)
    args.push_back(tb.getI64Type());
  KernelBuilder kb(module, name, args, flow->getLoc());
  if (bound)
    kb.bindRows(4, bound);
  SmallVector<int64_t> shape = boundShape(rt, bound);
  EwOperand sum{0, broadcastStrides(shape, shape)};
  EwOperand v{1, broadcastStrides(shape, shape)};
  return emitElementwise(
      kb, shape, {sum, v}, 2, true,
      [&](KernelBuilder &k, ArrayRef<Value> in, Value) {
        OpBuilder &b = k.b;
        Type t = in[0].getType();
        int64_t width =
            isa<VectorType>(t) ? cast<VectorType>(t).getNumElements() : 1;
        // (sum + v)·scale, two roundings as ref::add then ref::mul: scale
        // is 1 until the last image, then 1/N.
        Value added = arith::AddFOp::create(b, k.loc, in[0], in[1]);
        return Value(
            arith::MulFOp::create(b, k.loc, added, k.splat(k.arg(3), width)));
      });
}

} // namespace trellis::codegen::detail
