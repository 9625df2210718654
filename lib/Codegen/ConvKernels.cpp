//===- ConvKernels.cpp - Convolution kernels ------------------------------===//
//
// The dense conv's im2col and direct kernels, the sparse conv's neighbour
// gather and tap sum.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/KernelFamilies.h"

namespace trellis::codegen::detail {

FailureOr<Launch> emitIm2colKernel(Operation *conv, gpu::GPUModuleOp module,
                                   StringRef name, int64_t &scratchBytes) {
  if (failed(checkStatic(conv)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(conv->getOperand(0));
  ArrayRef<int64_t> w = shapeOf(conv->getOperand(1));
  ArrayRef<int64_t> y = shapeOf(conv->getResult(0));
  Type et = elemOf(conv->getOperand(0));
  const int64_t batch = x[0], cin = x[1], d = x[2], h = x[3], wd = x[4];
  const int64_t k = w[2], pad = intAttrOr(conv, "padding", 1);
  const int64_t od = y[2], oh = y[3], ow = y[4];
  const int64_t taps = k * k * k, plane = od * oh * ow;
  const int64_t colElems = batch * cin * taps * plane;
  if (colElems > kMaxElements)
    return conv->emitError() << "has no GPU implementation: its im2col buffer "
                                "has 2^31 or more elements";
  scratchBytes = colElems * elemBytes(et);
  auto xTy = MemRefType::get({product(x)}, et);
  auto colTy = MemRefType::get({colElems}, et);
  KernelBuilder kb(module, name, {xTy, colTy}, conv->getLoc());
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  // col[b][(ci·k³ + (a·k + β)·k + γ)][(z·H' + y)·W' + x]
  //   = x[b, ci, z+a−p, y+β−p, x+γ−p] (0 outside): V output columns of one
  // output row per thread, stored as one vector.
  const int64_t v = pow2Divisor(ow, 16 / elemBytes(et));
  const int64_t groups = colElems / v;
  Value gid = kb.globalId();
  kb.guard(kb.ult(gid, groups));
  Value flat = kb.mul(gid, v);
  Value ox = kb.rem(flat, ow);
  Value r = kb.div(flat, ow);
  Value oy = kb.rem(r, oh);
  r = kb.div(r, oh);
  Value oz = kb.rem(r, od);
  r = kb.div(r, od);
  Value tap = kb.rem(r, taps);
  Value bc = kb.div(r, taps); // b·Cin + ci
  Value ka = kb.div(tap, k * k), kbeta = kb.rem(kb.div(tap, k), k),
        kg = kb.rem(tap, k);
  auto shifted = [&](Value o, Value kk) {
    return arith::SubIOp::create(b, loc, kb.add(o, kk), kb.idx(pad));
  };
  Value iz = shifted(oz, ka), iy = shifted(oy, kbeta);
  Value rowOk =
      arith::AndIOp::create(b, loc, kb.inRange(iz, d), kb.inRange(iy, h));
  Value rowBase = kb.add(kb.mul(bc, d * h * wd),
                         kb.add(kb.mul(iz, h * wd), kb.mul(iy, wd)));
  Value zero = kb.zeroOf(et);
  SmallVector<Value> elems;
  for (int64_t i = 0; i < v; ++i) {
    Value ix = shifted(kb.add(ox, kb.idx(i)), kg);
    Value ok = arith::AndIOp::create(b, loc, rowOk, kb.inRange(ix, wd));
    // Read a clamped, always valid address; select zero outside.
    Value off =
        arith::SelectOp::create(b, loc, ok, kb.add(rowBase, ix), kb.idx(0));
    Value e = kb.load(kb.arg(0), off, 1);
    elems.push_back(arith::SelectOp::create(b, loc, ok, e, zero));
  }
  Value out = v == 1 ? elems[0]
                     : Value(vector::FromElementsOp::create(
                           b, loc, VectorType::get({v}, et), elems));
  kb.store(out, kb.arg(1), flat);
  return launch1d(groups);
}

bool isDirectConv(Operation *conv) {
  auto w = dyn_cast<RankedTensorType>(conv->getOperand(1).getType());
  return w && w.getRank() == 5 && w.getDimSize(0) <= kMaxDirectConvOutputs;
}

FailureOr<Launch> emitDirectConvKernel(Operation *conv, gpu::GPUModuleOp module,
                                       StringRef name) {
  if (failed(checkStatic(conv)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(conv->getOperand(0));
  ArrayRef<int64_t> w = shapeOf(conv->getOperand(1));
  ArrayRef<int64_t> y = shapeOf(conv->getResult(0));
  Type et = elemOf(conv->getOperand(0));
  const int64_t batch = x[0], cin = x[1], d = x[2], h = x[3], wd = x[4];
  const int64_t cout = w[0], k = w[2], pad = intAttrOr(conv, "padding", 1);
  const int64_t od = y[2], oh = y[3], ow = y[4];
  const int64_t taps = k * k * k, plane = od * oh * ow, volume = d * h * wd;
  if (product(x) > kMaxElements || product(y) > kMaxElements)
    return conv->emitError() << "has no GPU implementation: a tensor has "
                                "2^31 or more elements";
  KernelBuilder kb(module, name,
                   {MemRefType::get({product(x)}, et),
                    MemRefType::get({product(w)}, et),
                    MemRefType::get({product(y)}, et)},
                   conv->getLoc());
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  // out[b, o, z, y, x] = Σ_ci Σ_taps w[o, ci, a, β, γ] · in[b, ci, z+a−p,
  // y+β−p, x+γ−p], in f32, one thread per output position (all Cout). The
  // taps' offsets and bounds are the same for every input channel: computed
  // once, then the channel loop reads x at base + offset.
  Value gid = kb.globalId();
  kb.guard(kb.ult(gid, batch * plane));
  Value ox = kb.rem(gid, ow);
  Value r = kb.div(gid, ow);
  Value oy = kb.rem(r, oh);
  r = kb.div(r, oh);
  Value oz = kb.rem(r, od);
  Value bIdx = kb.div(r, od);
  Value pos = kb.rem(gid, plane);
  auto shifted = [&](Value o, int64_t t) {
    return arith::SubIOp::create(b, loc, o, kb.idx(pad - t));
  };
  SmallVector<Value> tapOk, tapOff;
  for (int64_t a = 0; a < k; ++a)
    for (int64_t be = 0; be < k; ++be)
      for (int64_t g = 0; g < k; ++g) {
        Value iz = shifted(oz, a), iy = shifted(oy, be), ix = shifted(ox, g);
        Value ok = arith::AndIOp::create(
            b, loc, kb.inRange(iz, d),
            arith::AndIOp::create(b, loc, kb.inRange(iy, h),
                                  kb.inRange(ix, wd)));
        Value off = kb.add(kb.mul(iz, h * wd), kb.add(kb.mul(iy, wd), ix));
        tapOk.push_back(ok);
        // A clamped, always valid address; zero is selected outside.
        tapOff.push_back(arith::SelectOp::create(b, loc, ok, off, kb.idx(0)));
      }
  Value zero = kb.f32(0.0, b.getF32Type());
  SmallVector<Value> init(cout, zero);
  Value xBatch = kb.mul(bIdx, cin * volume);
  auto loop = scf::ForOp::create(
      b, loc, kb.idx(0), kb.idx(cin), kb.idx(1), init,
      [&](OpBuilder &nb, Location l, Value ci, ValueRange acc) {
        OpBuilder::InsertionGuard ig(kb.b);
        kb.b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        Value xBase = kb.add(xBatch, kb.mul(ci, volume));
        Value wBase = kb.mul(ci, taps);
        SmallVector<Value> sums(acc.begin(), acc.end());
        for (int64_t t = 0; t < taps; ++t) {
          Value v = kb.toF32(kb.load(kb.arg(0), kb.add(xBase, tapOff[t]), 1));
          v = arith::SelectOp::create(kb.b, l, tapOk[t], v, zero);
          for (int64_t o = 0; o < cout; ++o) {
            Value wv = kb.toF32(kb.load(
                kb.arg(1), kb.add(wBase, kb.idx(o * cin * taps + t)), 1));
            sums[o] = arith::AddFOp::create(
                kb.b, l, sums[o], arith::MulFOp::create(kb.b, l, wv, v));
          }
        }
        scf::YieldOp::create(kb.b, l, sums);
      });
  for (int64_t o = 0; o < cout; ++o)
    kb.store(kb.fromF32(loop.getResult(o), et), kb.arg(2),
             kb.add(kb.mul(kb.add(kb.mul(bIdx, cout), kb.idx(o)), plane), pos));
  return launch1d(batch * plane);
}

FailureOr<SparseConvKernels> emitSparseConvKernels(Operation *conv,
                                                   gpu::GPUModuleOp module,
                                                   StringRef gatherName,
                                                   StringRef tapSumName) {
  auto op = cast<mlir::trellis::SparseConv3dOp>(conv);
  auto nbrTy = dyn_cast_or_null<mlir::trellis::NeighborMapType>(
      op.getNeighbors() ? op.getNeighbors().getType() : Type());
  if (!nbrTy)
    return conv->emitError() << "has no GPU implementation: a "
                                "k > 1 sparse conv needs its neighbour map";
  auto xTy = cast<RankedTensorType>(op.getFeats().getType());
  auto outTy = cast<RankedTensorType>(op.getResult().getType());
  // (rowBound: only dimension 0 dynamic, and bounded.)
  if (failed(rowBound(conv)))
    return failure();
  for (Type t : conv->getOperandTypes())
    if (isa<RankedTensorType>(t) &&
        failed(checkKernelTensor(conv, t, ownRows(t))))
      return failure();
  if (failed(checkKernelTensor(conv, outTy, ownRows(outTy))))
    return failure();
  ArrayRef<int64_t> w = shapeOf(op.getWeight());
  Type et = xTy.getElementType();
  const int64_t cout = w[0], cin = w[4],
                kvol =
                    nbrTy.getKernel() * nbrTy.getKernel() * nbrTy.getKernel();
  // The neighbour map: int32 [rows, k³] at the map's bound (capped like a
  // tensor's, addressableRows).
  const int64_t nbrRows = std::min(nbrTy.getBound(), kMaxElements / kvol);
  auto nbrMem = MemRefType::get({nbrRows * kvol},
                                IntegerType::get(conv->getContext(), 32));
  auto rowsOf = [](RankedTensorType t) {
    return t.isDynamicDim(0) ? addressableRows(t) : t.getDimSize(0);
  };
  const int64_t xRows = rowsOf(xTy), outRows = rowsOf(outTy);
  MLIRContext *ctx = conv->getContext();
  Type i64 = IntegerType::get(ctx, 64);
  SparseConvKernels result;

  // Gather: col[r, o·Cin + c] = x[nbr[row0 + r, o], c] (0 for an inactive
  // neighbour), V channels per thread (16 bytes where Cin allows). Chunks of
  // at most kSparseConvGatherBytes; col rows are the chunk's rows.
  const int64_t rowBytes = kvol * cin * elemBytes(et);
  result.chunkRows = std::max<int64_t>(
      1, std::min(outRows, kSparseConvGatherBytes / rowBytes));
  result.gatherBytes = result.chunkRows * rowBytes;
  {
    KernelBuilder kb(module, gatherName,
                     {flatMemRef(xTy, xRows), nbrMem,
                      MemRefType::get({result.chunkRows * kvol * cin}, et), i64,
                      i64},
                     conv->getLoc());
    OpBuilder &b = kb.b;
    Location loc = kb.loc;
    kb.bindRows(4, result.chunkRows);
    Value row0 =
        arith::IndexCastOp::create(b, loc, b.getIndexType(), kb.arg(3));
    const int64_t v = pow2Divisor(cin, 16 / elemBytes(et));
    const int64_t perRow = kvol * cin / v;
    // Rows of col: (r, o) pairs, ro = r·k³ + o.
    auto [ro, e] = kb.rowGroup(kb.mul(kb.rows, kvol), cin / v, v);
    Value src = memref::LoadOp::create(
        b, loc, kb.arg(1), ValueRange{kb.add(kb.mul(row0, kvol), ro)});
    Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, src,
                                         kb.i32(0));
    // Read row 0 for an inactive neighbour (always valid when rows > 0),
    // select zero.
    Value srcRow = arith::IndexCastOp::create(
        b, loc, b.getIndexType(),
        arith::SelectOp::create(b, loc, active, src, kb.i32(0)));
    Value val = kb.load(kb.arg(0), kb.add(kb.mul(srcRow, cin), e), v);
    Type vt = val.getType();
    val = arith::SelectOp::create(b, loc, active, val, kb.zeroOf(vt));
    kb.store(val, kb.arg(2), kb.add(kb.mul(ro, cin), e));
    result.gather = launch1d(result.chunkRows * perRow);
    result.gather.threadsPerRow = perRow;
  }

  // Tap sum: out[p, c] = bias[c] + Σ_o y[o, nbr[p, o], c] over the active
  // neighbours, o ascending, in f32 (the CPU reference's order); y
  // [k³, rowsIn, Cout] f32 of at most kSparseConvTapsBytes. V channels per
  // thread (16 bytes of y).
  result.tapsBytes =
      std::min<int64_t>(kSparseConvTapsBytes, kvol * xRows * cout * 4);
  {
    const bool hasBias = bool(op.getBias());
    SmallVector<Type> args = {
        MemRefType::get({result.tapsBytes / 4}, Float32Type::get(ctx)), nbrMem};
    if (hasBias)
      args.push_back(flatMemRef(op.getBias().getType()));
    args.push_back(flatMemRef(outTy, outRows));
    args.push_back(i64); // rows
    args.push_back(i64); // rowsIn
    const unsigned outArg = hasBias ? 3 : 2, rowsArg = outArg + 1;
    KernelBuilder kb(module, tapSumName, args, conv->getLoc());
    OpBuilder &b = kb.b;
    Location loc = kb.loc;
    kb.bindRows(rowsArg, outRows);
    Value rowsIn = arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                              kb.arg(rowsArg + 1));
    const int64_t v = pow2Divisor(cout, 4);
    const int64_t perRow = cout / v;
    auto [p, c] = kb.rowGroup(kb.rows, perRow, v);
    Type accTy = v == 1 ? Type(b.getF32Type())
                        : Type(VectorType::get({v}, b.getF32Type()));
    Value sum = hasBias ? kb.toF32(kb.load(kb.arg(2), c, v)) : kb.zeroOf(accTy);
    Value tapRows = kb.mul(rowsIn, cout); // one tap's products
    for (int64_t o = 0; o < kvol; ++o) {
      Value q = memref::LoadOp::create(
          b, loc, kb.arg(1), ValueRange{kb.add(kb.mul(p, kvol), kb.idx(o))});
      Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, q,
                                           kb.i32(0));
      Value qRow = arith::IndexCastOp::create(
          b, loc, b.getIndexType(),
          arith::SelectOp::create(b, loc, active, q, kb.i32(0)));
      Value at = kb.add(kb.mul(tapRows, o), kb.add(kb.mul(qRow, cout), c));
      Value y = kb.load(kb.arg(0), at, v);
      sum = arith::SelectOp::create(b, loc, active,
                                    arith::AddFOp::create(b, loc, sum, y), sum);
    }
    kb.store(kb.fromF32(sum, et), kb.arg(outArg), kb.add(kb.mul(p, cout), c));
    result.tapSum = launch1d(outRows * perRow);
    result.tapSum.threadsPerRow = perRow;
  }
  return result;
}

} // namespace trellis::codegen::detail
