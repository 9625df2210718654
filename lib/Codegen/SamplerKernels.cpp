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

/// An elementwise kernel over the sample of `flow`: parameters `buffers`
/// sample-sized f32 buffers, then `scalars`, then `rows: i64` for a sample
/// with dynamic rows; buffers 0..inputs-1 are loaded for `body`, whose
/// value is stored to buffer `output`.
FailureOr<Launch> emitSampleKernel(Operation *flow, gpu::GPUModuleOp module,
                                   StringRef name, unsigned buffers,
                                   ArrayRef<Type> scalars, unsigned inputs,
                                   unsigned output, const EwBody &body) {
  FailureOr<std::pair<MemRefType, int64_t>> sample = sampleBuffer(flow);
  if (failed(sample))
    return failure();
  auto [mt, bound] = *sample;
  auto rt = cast<RankedTensorType>(flow->getOperand(0).getType());
  SmallVector<Type> args(buffers, mt);
  llvm::append_range(args, scalars);
  if (bound)
    args.push_back(Builder(flow->getContext()).getI64Type());
  KernelBuilder kb(module, name, args, flow->getLoc());
  if (bound)
    kb.bindRows(unsigned(args.size() - 1), bound);
  SmallVector<int64_t> shape = boundShape(rt, bound);
  SmallVector<EwOperand> operands;
  for (unsigned i = 0; i < inputs; ++i)
    operands.push_back({i, broadcastStrides(shape, shape)});
  return emitElementwise(kb, shape, operands, output, true, body);
}

} // namespace

FailureOr<Launch> emitFlowUpdateKernel(Operation *flow, gpu::GPUModuleOp module,
                                       StringRef name) {
  // (x, v_cond, v_uncond, x_next, strength, dt, guided): x and v_cond are
  // loaded; v_uncond is read only when guided (it may be null otherwise).
  Builder tb(flow->getContext());
  return emitSampleKernel(
      flow, module, name, 4,
      {tb.getF32Type(), tb.getF32Type(), tb.getI32Type()}, /*inputs=*/2,
      /*output=*/3, [&](KernelBuilder &k, ArrayRef<Value> v, Value flat) {
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
  // (sum, v, sum_next, scale)
  return emitSampleKernel(
      flow, module, name, 3, {Builder(flow->getContext()).getF32Type()},
      /*inputs=*/2, /*output=*/2,
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
