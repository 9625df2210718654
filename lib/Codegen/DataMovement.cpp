//===- DataMovement.cpp - Data movement kernels ---------------------------===//
//
// Split, concat, permute, pixel shuffle, the sparse row-index kernels
// (gather_rows, segment_mean, subdivide), the group norm's apply half and
// the Swin window rows of a sparse attention.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/KernelFamilies.h"

namespace trellis::codegen::detail {

/// Split (toPieces) or concat along `axis` of a row-major tensor viewed as
/// [outer, dim, inner]: the thread walks the whole (input or output) tensor
/// in groups of V elements and picks its piece with an if-chain. Dynamic
/// rows (axis >= 1): `outer` is for the bound `bound` of dimension 0.
Launch emitSplitConcat(KernelBuilder &kb, bool toPieces, unsigned whole,
                       ArrayRef<unsigned> pieces, ArrayRef<int64_t> sizes,
                       int64_t outer, int64_t inner, int64_t bound) {
  const int64_t dim = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
  Type et = cast<MemRefType>(kb.arg(whole).getType()).getElementType();
  int64_t v = 16 / elemBytes(et);
  for (int64_t s : sizes)
    v = pow2Divisor(s * inner, v);
  const int64_t rowLen = dim * inner;
  const int64_t groups = outer * rowLen / v;
  // Groups per dimension-0 row (V divides every piece's row).
  const int64_t perRow = kb.rows ? groups / bound : 0;
  Value gid = kb.globalId();
  kb.guard(kb.rows ? kb.ult(gid, kb.rowsTimes(perRow)) : kb.ult(gid, groups));
  Value flat = kb.mul(gid, v);
  Value o = kb.div(flat, rowLen);
  Value col = kb.rem(flat, rowLen);
  Value data;
  if (toPieces)
    data = kb.load(kb.arg(whole), flat, v);
  std::function<void(size_t, int64_t)> piece = [&](size_t i, int64_t at) {
    const int64_t len = sizes[i] * inner;
    auto emit = [&] {
      Value local = kb.add(
          kb.mul(o, len), arith::SubIOp::create(kb.b, kb.loc, col, kb.idx(at)));
      if (toPieces)
        kb.store(data, kb.arg(pieces[i]), local);
      else
        kb.store(kb.load(kb.arg(pieces[i]), local, v), kb.arg(whole), flat);
    };
    if (i + 1 == pieces.size()) {
      emit();
      return;
    }
    auto ifOp = scf::IfOp::create(kb.b, kb.loc, kb.ult(col, at + len),
                                  /*withElseRegion=*/true);
    OpBuilder::InsertionGuard ig(kb.b);
    kb.b.setInsertionPointToStart(ifOp.thenBlock());
    emit();
    kb.b.setInsertionPointToStart(ifOp.elseBlock());
    piece(i + 1, at + len);
  };
  piece(0, 0);
  Launch l = launch1d(groups);
  l.threadsPerRow = perRow;
  return l;
}

/// out[i] = in[src(i)] for every output element (V elements per thread when
/// `v` > 1: src(i) of a group's first element, the group contiguous in both).
Launch emitGather(KernelBuilder &kb, ArrayRef<int64_t> outShape, int64_t v,
                  function_ref<Value(ArrayRef<Value>)> src) {
  const int64_t groups = product(outShape) / v;
  Value gid = kb.globalId();
  kb.guard(kb.ult(gid, groups));
  Value flat = kb.mul(gid, v);
  SmallVector<Value> index(outShape.size());
  Value rest = flat;
  for (int d = int(outShape.size()) - 1; d >= 0; --d) {
    index[d] = d == 0 ? rest : kb.rem(rest, outShape[d]);
    if (d > 0)
      rest = kb.div(rest, outShape[d]);
  }
  kb.store(kb.load(kb.arg(0), src(index), v), kb.arg(1), flat);
  return launch1d(groups);
}

/// The row-index kernels of the sparse resampling ops (trellis.gather_rows,
/// trellis.segment_mean, trellis.sparse.subdivide_features): each output row
/// reads whole rows of x picked by an index (subdivide: row r / 8, its
/// parent's, spec §6.5). Every tensor is flattened at
/// its own bound (x, the index and the result have different row counts);
/// the actual rows (the result's) come last. V elements per thread, V the
/// largest power of two dividing the row up to 16 bytes.
FailureOr<Launch> emitRowIndexKernel(Operation *op, StringRef n,
                                     gpu::GPUModuleOp module, StringRef name) {
  // (rowBound checks that only dimension 0 is dynamic, and bounded.)
  if (failed(rowBound(op)))
    return failure();
  SmallVector<Type> types(op->getOperandTypes());
  types.push_back(op->getResult(0).getType());
  for (Type t : types)
    if (failed(checkKernelTensor(op, t, ownRows(t))))
      return failure();
  SmallVector<Type> args;
  for (Type t : op->getOperandTypes())
    args.push_back(flatMemRef(t, ownRows(t)));
  Type outTy = op->getResult(0).getType();
  args.push_back(flatMemRef(outTy, ownRows(outTy)));
  const int64_t bound = ownRows(outTy);
  if (bound)
    args.push_back(IntegerType::get(op->getContext(), 64));
  KernelBuilder kb(module, name, args, op->getLoc());
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  const unsigned outArg = op->getNumOperands();
  ArrayRef<int64_t> outShape = shapeOf(op->getResult(0));
  const int64_t rowElems = product(outShape.drop_front());
  const int64_t v =
      pow2Divisor(rowElems, 16 / elemBytes(elemOf(op->getOperand(0))));
  const int64_t perRow = rowElems / v;
  Value rows;
  if (bound) {
    kb.bindRows(outArg + 1, bound);
    rows = kb.rows;
  } else {
    rows = kb.idx(outShape[0]);
  }
  auto [r, e] = kb.rowGroup(rows, perRow, v);
  auto indexAt = [&](unsigned arg, Value at) {
    return kb.loadIndex(kb.arg(arg), at);
  };
  auto rowStart = [&](Value row) { return kb.mul(row, rowElems); };
  Value result;
  if (n == "gather_rows") {
    // An index outside x's rows (its bound, if dynamic) reads row 0 and
    // yields NaN (integers: 0) instead of reading past the buffer; the CPU
    // reference reports the index (a Python embedding's indices are data).
    Type xTy = op->getOperand(0).getType();
    int64_t xRows = ownRows(xTy) ? ownRows(xTy) : shapeOf(op->getOperand(0))[0];
    Value src = indexAt(1, r);
    Value valid = kb.ult(src, xRows);
    src = arith::SelectOp::create(b, loc, valid, src, kb.idx(0));
    result = kb.load(kb.arg(0), kb.add(rowStart(src), e), v);
    Type et = elemOf(op->getOperand(0));
    Value bad =
        isa<FloatType>(et)
            ? Value(arith::ConstantOp::create(
                  b, loc,
                  b.getFloatAttr(et,
                                 APFloat::getNaN(
                                     cast<FloatType>(et).getFloatSemantics()))))
            : Value(arith::ConstantOp::create(b, loc, b.getZeroAttr(et)));
    result = arith::SelectOp::create(b, loc, valid, result, kb.splat(bad, v));
  } else if (n == "sparse.subdivide_features") {
    result = kb.load(kb.arg(0), kb.add(rowStart(kb.div(r, 8)), e), v);
  } else { // segment_mean
    Value begin = indexAt(1, r), end = indexAt(1, kb.add(r, kb.idx(1)));
    Type accTy = v == 1 ? Type(b.getF32Type())
                        : Type(VectorType::get({v}, b.getF32Type()));
    auto loop = scf::ForOp::create(
        b, loc, begin, end, kb.idx(1), ValueRange{kb.zeroOf(accTy)},
        [&](OpBuilder &nb, Location l, Value j, ValueRange acc) {
          OpBuilder::InsertionGuard ig(kb.b);
          kb.b.setInsertionPoint(nb.getInsertionBlock(),
                                 nb.getInsertionPoint());
          Value x = kb.toF32(
              kb.load(kb.arg(0), kb.add(rowStart(indexAt(2, j)), e), v));
          scf::YieldOp::create(
              kb.b, l, Value(arith::AddFOp::create(kb.b, l, acc[0], x)));
        });
    // n_s + extra_count, exact in f32 (below 2^24).
    Value count =
        arith::AddIOp::create(b, loc, arith::SubIOp::create(b, loc, end, begin),
                              kb.idx(intAttrOr(op, "extra_count", 0)));
    Value countF = arith::UIToFPOp::create(
        b, loc, b.getF32Type(),
        arith::IndexCastOp::create(b, loc, b.getI32Type(), count));
    Value sum = loop.getResult(0);
    result = kb.fromF32(arith::DivFOp::create(b, loc, sum, kb.splat(countF, v)),
                        elemOf(op->getResult(0)));
  }
  kb.store(result, kb.arg(outArg), kb.add(rowStart(r), e));
  Launch l = launch1d(bound ? bound * perRow : outShape[0] * perRow);
  if (bound)
    l.threadsPerRow = perRow;
  return l;
}

/// The elementwise half of trellis.sparse.group_norm: parameters (x, coords, γ,
/// β, out, stats, rows). The runtime's reduction kernels write stats f32 [B ·
/// G, 2] = (mean, 1/√(var + eps)) per (sample, group) first; then y = (x −
/// mean) · rstd · γ[c] + β[c] in f32, one rounding, the row's sample from the
/// coordinates' batch column (coords int32 [N, 4]). V channels per thread, V
/// dividing the group width (one statistics pair).
FailureOr<Launch> emitGroupNormApplyKernel(Operation *op,
                                           gpu::GPUModuleOp module,
                                           StringRef name) {
  auto norm = cast<mlir::trellis::SparseGroupNormOp>(op);
  auto xTy = cast<RankedTensorType>(norm.getFeats().getType());
  auto coordsTy = cast<mlir::trellis::CoordsType>(norm.getCoords().getType());
  if (failed(rowBound(op)))
    return failure();
  for (Value v :
       {norm.getFeats(), norm.getWeight(), norm.getBias(), norm.getResult()})
    if (failed(checkKernelTensor(op, v.getType(), ownRows(v.getType()))))
      return failure();
  const int64_t rows = ownRows(xTy), c = xTy.getDimSize(1),
                groups = norm.getGroups();
  if (groups < 1 || c % groups != 0)
    return op->emitError() << "has no GPU implementation: " << c
                           << " channels in " << groups << " groups";
  Type et = xTy.getElementType();
  MLIRContext *ctx = op->getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32);
  // At most one sample per row: B ≤ the coordinates' bound.
  const int64_t coordRows = std::min(coordsTy.getBound(), kMaxElements / 4);
  const int64_t statRows =
      std::min(coordsTy.getBound(), kMaxElements / (2 * groups));
  KernelBuilder kb(
      module, name,
      {flatMemRef(xTy, rows), MemRefType::get({coordRows * 4}, i32),
       MemRefType::get({c}, f32), MemRefType::get({c}, f32),
       flatMemRef(xTy, rows), MemRefType::get({statRows * groups * 2}, f32),
       IntegerType::get(ctx, 64)},
      op->getLoc());
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  kb.bindRows(6, rows);
  const int64_t width = c / groups;
  const int64_t v = pow2Divisor(width, 16 / elemBytes(et));
  const int64_t perRow = c / v;
  auto [r, e] = kb.rowGroup(kb.rows, perRow, v);
  Value sample = kb.loadIndex(kb.arg(1), kb.mul(r, 4));
  Value item = kb.add(kb.mul(sample, groups), kb.div(e, width));
  Value mean =
      memref::LoadOp::create(b, loc, kb.arg(5), ValueRange{kb.mul(item, 2)});
  Value rstd = memref::LoadOp::create(
      b, loc, kb.arg(5), ValueRange{kb.add(kb.mul(item, 2), kb.idx(1))});
  Value x = kb.toF32(kb.load(kb.arg(0), kb.add(kb.mul(r, c), e), v));
  Value y = arith::MulFOp::create(
      b, loc, arith::SubFOp::create(b, loc, x, kb.splat(mean, v)),
      kb.splat(rstd, v));
  y = arith::MulFOp::create(b, loc, y, kb.load(kb.arg(2), e, v));
  y = arith::AddFOp::create(b, loc, y, kb.load(kb.arg(3), e, v));
  kb.store(kb.fromF32(y, et), kb.arg(4), kb.add(kb.mul(r, c), e));
  Launch l = launch1d(rows * perRow);
  l.threadsPerRow = perRow;
  return l;
}

FailureOr<Launch> emitPermute(Operation *op, KernelBuilder &kb) {
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  auto permAttr = op->getAttrOfType<DenseI64ArrayAttr>("perm");
  if (!permAttr)
    return op->emitError() << "has no GPU implementation: missing 'perm'";
  ArrayRef<int64_t> perm = permAttr.asArrayRef();
  const int64_t rank = int64_t(in.size());
  SmallVector<int64_t> inStride(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    inStride[d] = inStride[d + 1] * in[d + 1];
  int64_t v = 1;
  if (rank > 0 && perm.back() == rank - 1)
    v = pow2Divisor(out.back(), 16 / elemBytes(elemOf(op->getOperand(0))));
  return emitGather(kb, out, v, [&](ArrayRef<Value> index) {
    Value off = kb.idx(0);
    for (int64_t d = 0; d < rank; ++d)
      if (out[d] != 1)
        off = kb.add(off, kb.mul(index[d], inStride[perm[d]]));
    return off;
  });
}

FailureOr<Launch> emitPixelShuffle(Operation *op, KernelBuilder &kb) {
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  const int64_t f = intAttrOr(op, "factor", 2);
  const int64_t c = out[1], d = in[2], h = in[3], w = in[4];
  // out[b, c, f·x+s1, f·y+s2, f·z+s3] = in[b, c·f³ + s1·f² + s2·f + s3, x, y,
  // z]
  return emitGather(kb, out, 1, [&](ArrayRef<Value> i) {
    Value ic =
        kb.add(kb.mul(i[1], f * f * f),
               kb.add(kb.mul(kb.rem(i[2], f), f * f),
                      kb.add(kb.mul(kb.rem(i[3], f), f), kb.rem(i[4], f))));
    Value ch = kb.add(kb.mul(i[0], c * f * f * f), ic);
    Value off =
        kb.add(kb.mul(ch, d * h * w),
               kb.add(kb.mul(kb.div(i[2], f), h * w),
                      kb.add(kb.mul(kb.div(i[3], f), w), kb.div(i[4], f))));
    return off;
  });
}

FailureOr<Launch> emitWindowRowsKernel(Operation *attention, Type rowsType,
                                       bool scatter, gpu::GPUModuleOp module,
                                       StringRef name) {
  auto rt = dyn_cast<RankedTensorType>(rowsType);
  if (!rt || rt.getRank() < 2 || !rt.isDynamicDim(0))
    return attention->emitError()
           << "has no GPU implementation of its window rows for " << rowsType;
  if (failed(checkKernelTensor(attention, rt, ownRows(rt))))
    return failure();
  MLIRContext *ctx = attention->getContext();
  Type et = rt.getElementType(), i64 = IntegerType::get(ctx, 64);
  const int64_t rows = ownRows(rt), width = product(rt.getShape().drop_front());
  auto index = MemRefType::get({rows}, IntegerType::get(ctx, 32));
  // The gather's source may be a strided view of a wider packed row (the q,
  // k or v columns of a qkv projection): addressed up to 2^31 elements, the
  // runtime checks its extent.
  auto dense = flatMemRef(rt, rows);
  auto source = scatter ? dense : MemRefType::get({kMaxElements}, et);
  SmallVector<Type> args = {source, index, dense};
  if (!scatter)
    args.push_back(i64); // the source's row stride in elements
  args.push_back(i64);   // rows
  KernelBuilder kb(module, name, args, attention->getLoc());
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  kb.bindRows(scatter ? 3 : 4, rows);
  const int64_t v = pow2Divisor(width, 16 / elemBytes(et));
  const int64_t perRow = width / v;
  auto [r, e] = kb.rowGroup(kb.rows, perRow, v);
  Value other = kb.loadIndex(kb.arg(1), r);
  if (scatter) {
    // out[rows[r]] = x[r]
    Value x = kb.load(kb.arg(0), kb.add(kb.mul(r, width), e), v);
    kb.store(x, kb.arg(2), kb.add(kb.mul(other, width), e));
  } else {
    // out[r] = x[rows[r] · stride]
    Value stride =
        arith::IndexCastOp::create(b, loc, b.getIndexType(), kb.arg(3));
    Value at = kb.add(arith::MulIOp::create(b, loc, other, stride), e);
    kb.store(kb.load(kb.arg(0), at, v), kb.arg(2), kb.add(kb.mul(r, width), e));
  }
  Launch l = launch1d(rows * perRow);
  l.threadsPerRow = perRow;
  return l;
}

} // namespace trellis::codegen::detail
