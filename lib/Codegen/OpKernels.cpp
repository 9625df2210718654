//===- OpKernels.cpp - The kernel of each generated op --------------------===//
//
// emitOpKernel: checks a generated op's tensors and hands it to its family
// (layer norm and the timestep embedding, with its frequency table baked in as
// the reference computes it, are here).
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/KernelFamilies.h"

#include <optional>

namespace trellis::codegen::detail {

/// `shape`: x's (bound) shape.
FailureOr<Launch> emitLayerNorm(Operation *op, KernelBuilder &kb,
                                ArrayRef<int64_t> shape) {
  int64_t rank = int64_t(shape.size());
  int64_t axis = intAttrOr(op, "axis", -1);
  if (axis < 0)
    axis += rank;
  RowSpec s{RowKind::LayerNorm, 0, shape[axis]};
  s.eps = float(floatAttrOr(op, "eps", 1e-5));
  if (op->getNumOperands() == 3) {
    s.gamma = 1;
    s.beta = 2;
  }
  s.x = 0;
  s.out = op->getNumOperands();
  int64_t outer = product(shape.take_front(axis));
  int64_t inner = product(shape.drop_front(axis + 1));
  if (inner == 1) {
    s.rows = outer;
    if (kb.rows)
      s.rowsPerItem = outer / shape.front();
    return emitRowKernel(kb, s);
  }
  if (kb.rows) {
    kb.func.erase();
    return op->emitError() << "has no GPU implementation with dynamic rows "
                              "over a non-last axis";
  }
  FailureOr<Launch> split = emitChannelSplitLayerNorm(kb, s, outer, inner);
  if (succeeded(split))
    return split;
  return emitAxisKernel(kb, s, outer, inner);
}

FailureOr<Launch> emitTimestepEmbedding(Operation *op, KernelBuilder &kb,
                                        gpu::GPUModuleOp module,
                                        StringRef name) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  const int64_t batch = shapeOf(op->getOperand(0))[0];
  const int64_t dim = intAttrOr(op, "dim", 256);
  const double maxPeriod = floatAttrOr(op, "max_period", 10000.0);
  const int64_t half = dim / 2;
  // The reference's table: (f32(−ln P)·j)/half in f32, exp in double,
  // rounded once to f32.
  SmallVector<float> freq;
  const float negLog = float(-std::log(maxPeriod));
  for (int64_t j = 0; j < half; ++j)
    freq.push_back(float(std::exp(double((negLog * float(j)) / float(half)))));
  std::string table = (name + "_freq").str();
  {
    OpBuilder mb(module.getContext());
    mb.setInsertionPointToStart(module.getBody());
    auto ty = MemRefType::get({std::max<int64_t>(1, half)}, mb.getF32Type());
    if (freq.empty())
      freq.push_back(0.0f);
    memref::GlobalOp::create(
        mb, loc, table, mb.getStringAttr("private"), ty,
        DenseElementsAttr::get(
            RankedTensorType::get(ty.getShape(), mb.getF32Type()),
            ArrayRef<float>(freq)),
        /*constant=*/true, /*alignment=*/IntegerAttr());
  }
  Value gid = kb.globalId();
  kb.guard(kb.ult(gid, batch * half));
  Value bi = kb.div(gid, half), j = kb.rem(gid, half);
  auto ty = MemRefType::get({std::max<int64_t>(1, half)}, b.getF32Type());
  Value tab = memref::GetGlobalOp::create(b, loc, ty, table);
  Value f = memref::LoadOp::create(b, loc, tab, ValueRange{j});
  Value t = memref::LoadOp::create(b, loc, kb.arg(0), ValueRange{bi});
  Value arg = arith::MulFOp::create(b, loc, t, f); // the f32 product τ·f_j
  // cos/sin of the f32 argument in double, rounded once (as the reference).
  Value argD = arith::ExtFOp::create(b, loc, b.getF64Type(), arg);
  Value c = arith::TruncFOp::create(b, loc, b.getF32Type(),
                                    math::CosOp::create(b, loc, argD));
  Value sn = arith::TruncFOp::create(b, loc, b.getF32Type(),
                                     math::SinOp::create(b, loc, argD));
  Value row = kb.mul(bi, dim);
  kb.store(c, kb.arg(1), kb.add(row, j));
  kb.store(sn, kb.arg(1), kb.add(row, kb.add(j, kb.idx(half))));
  if (dim % 2 == 1) { // the reference's zero pad column
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, j, kb.idx(0));
    kb.guard(first);
    kb.store(kb.f32(0, b.getF32Type()), kb.arg(1),
             kb.add(row, kb.idx(dim - 1)));
  }
  return launch1d(batch * half);
}

namespace {

/// What the emitters of one op share: the builder (its rows bound for a
/// dynamic-row kernel), the op's row bound, and the shapes at that bound.
struct OpKernelContext {
  Operation *op;
  KernelBuilder &kb;
  int64_t bound; ///< 0: static
  unsigned nIn;  ///< operands (the results' arguments follow)
  SmallVector<int64_t> outShape;
  /// The E4M3 variant's result (emitOpKernel), its scale the argument
  /// after the results.
  std::optional<unsigned> e4m3Result = std::nullopt;
  /// `v`'s shape, a dynamic dimension 0 at the bound.
  SmallVector<int64_t> shape(Value v) const {
    return boundShape(v.getType(), bound);
  }
  /// Operand `i` read at the output's index (NumPy broadcasting).
  EwOperand same(unsigned i) const {
    return EwOperand{i, broadcastStrides(shape(op->getOperand(i)), outShape)};
  }
};

/// The elementwise ops' kernels; nullopt when `n` is not one.
std::optional<FailureOr<Launch>> emitElementwiseOp(OpKernelContext &c,
                                                   StringRef n) {
  if (n == "cast")
    return emitElementwise(
        c.kb, c.outShape, {c.same(0)}, 1, true,
        [](KernelBuilder &, ArrayRef<Value> x, Value) { return x[0]; });
  if (isUnaryName(n))
    return emitElementwise(c.kb, c.outShape, {c.same(0)}, 1, true,
                           [n](KernelBuilder &k, ArrayRef<Value> x, Value) {
                             return unaryF32(k, n, x[0]);
                           });
  if (llvm::is_contained({"add", "sub", "mul", "div", "maximum", "pow",
                          "greater", "less", "equal"},
                         n)) {
    bool isInt = isa<IntegerType>(elemOf(c.op->getResult(0)));
    return emitElementwise(
        c.kb, c.outShape, {c.same(0), c.same(1)}, 2, !isInt,
        [n, isInt](KernelBuilder &k, ArrayRef<Value> x, Value) {
          return binary(k, n, x[0], x[1], isInt);
        });
  }
  if (n == "where") // cond ≠ 0 (a NaN cond too) ? a : b
    return emitElementwise(
        c.kb, c.outShape, {c.same(0), c.same(1), c.same(2)}, 3, true,
        [](KernelBuilder &k, ArrayRef<Value> x, Value) -> Value {
          Value set =
              arith::CmpFOp::create(k.b, k.loc, arith::CmpFPredicate::UNE, x[0],
                                    k.f32(0, x[0].getType()));
          return arith::SelectOp::create(k.b, k.loc, set, x[1], x[2]);
        });
  if (n == "broadcast_rows") {
    ArrayRef<int64_t> in = shapeOf(c.op->getOperand(0));
    EwOperand row{0, broadcastStrides(in, c.outShape)};
    if (in.size() == 1 || product(in) == c.outShape.back()) {
      row.strides.assign(c.outShape.size(), 0);
      row.strides.back() = 1;
    }
    return emitElementwise(
        c.kb, c.outShape, {row}, 1, false,
        [](KernelBuilder &, ArrayRef<Value> x, Value) { return x[0]; });
  }
  if (n == "modulate" || n == "gated_residual") {
    SmallVector<int64_t> x = c.shape(c.op->getOperand(0));
    SmallVector<EwOperand> ops = {c.same(0)};
    // Dynamic rows: x-shaped, per-sample or NumPy-broadcast ([1, C]) vectors.
    auto xTy = cast<RankedTensorType>(c.op->getOperand(0).getType());
    for (unsigned i = 1; i < 3; ++i) {
      auto vTy = cast<RankedTensorType>(c.op->getOperand(i).getType());
      bool numpy = c.bound && !isPerSampleVector(vTy, xTy);
      ops.push_back(
          {i, numpy ? broadcastStrides(c.shape(c.op->getOperand(i)), x)
                    : perSampleStrides(c.shape(c.op->getOperand(i)), x)});
    }
    bool mod = n == "modulate";
    return emitElementwise(
        c.kb, c.outShape, ops, 3, true,
        [mod](KernelBuilder &k, ArrayRef<Value> v, Value) {
          OpBuilder &b = k.b;
          if (mod) { // x·(1 + scale) + shift
            Value s =
                arith::AddFOp::create(b, k.loc, k.f32(1, v[2].getType()), v[2]);
            return Value(arith::AddFOp::create(
                b, k.loc, arith::MulFOp::create(b, k.loc, v[0], s), v[1]));
          }
          // x + gate·h
          return Value(arith::AddFOp::create(
              b, k.loc, v[0], arith::MulFOp::create(b, k.loc, v[2], v[1])));
        });
  }
  if (n == "cfg_combine") {
    double w = floatAttrOr(c.op, "strength", 0);
    return emitElementwise(
        c.kb, c.outShape, {c.same(0), c.same(1)}, 2, true,
        [w](KernelBuilder &k, ArrayRef<Value> v, Value) {
          Type t = v[0].getType();
          Value a = arith::MulFOp::create(
              k.b, k.loc, k.f32(double(float(1.0 + w)), t), v[0]);
          Value c = arith::MulFOp::create(k.b, k.loc,
                                          k.f32(double(float(w)), t), v[1]);
          return Value(arith::SubFOp::create(k.b, k.loc, a, c));
        });
  }
  if (n == "euler_update") {
    double dt = floatAttrOr(c.op, "dt", 0);
    return emitElementwise(
        c.kb, c.outShape, {c.same(0), c.same(1)}, 2, true,
        [dt](KernelBuilder &k, ArrayRef<Value> v, Value) {
          Value s = arith::MulFOp::create(
              k.b, k.loc, k.f32(double(float(dt)), v[1].getType()), v[1]);
          return Value(arith::SubFOp::create(k.b, k.loc, v[0], s));
        });
  }
  return std::nullopt;
}

/// layer_norm_modulate: (x, shift, scale) → result; gated_residual_norm:
/// (x, h, gate[, plus][, shift, scale][, weight, bias]) → (residual, result).
FailureOr<Launch> emitFusedLayerNorm(OpKernelContext &c, StringRef n) {
  // The operand number of each optional operand, or -1.
  const bool residual = n == "gated_residual_norm";
  int plus = -1, shift = 1, scale = 2, weight = -1, bias = -1;
  if (residual) {
    auto fused = cast<mlir::trellis::GatedResidualNormOp>(c.op);
    auto operand = [&](unsigned ods) {
      auto [start, length] = fused.getODSOperandIndexAndLength(ods);
      return length ? int(start) : -1;
    };
    plus = operand(3), shift = operand(4), scale = operand(5);
    weight = operand(6), bias = operand(7);
  }
  SmallVector<int64_t> x = c.shape(c.op->getOperand(0));
  auto xTy = cast<RankedTensorType>(c.op->getOperand(0).getType());
  if (residual && !rowTiling(xTy.getElementType(), x.back()).inRegisters) {
    c.kb.func.erase();
    return c.op->emitError() << "has no GPU implementation for rows of "
                             << x.back() << " elements";
  }
  RowSpec s{shift >= 0 ? RowKind::LayerNormModulate : RowKind::LayerNorm,
            product(x) / x.back(), x.back()};
  s.eps = float(floatAttrOr(c.op, "eps", 1e-6));
  s.x = 0;
  s.shift = shift;
  s.scale = scale;
  s.gamma = weight;
  s.beta = bias;
  if (residual) {
    s.h = 1;
    s.gate = 2;
    s.plus = plus;
    s.residualOut = int(c.nIn);
  }
  s.out = residual ? c.nIn + 1 : c.nIn;
  if (c.e4m3Result) {
    assert(*c.e4m3Result == s.out - c.nIn && "e4m3ResultOf's result");
    s.quantize = int(c.nIn + c.op->getNumResults());
  }
  // x-shaped vectors are per row, per-sample [B, C] ones per L rows of x
  // [B, L, C]; with dynamic rows, [1, C] ones are shared by all rows.
  auto shared = [&](int i, bool &perRow) {
    perRow = c.shape(c.op->getOperand(i)) == x;
    return c.bound && !perRow &&
           !isPerSampleVector(
               cast<RankedTensorType>(c.op->getOperand(i).getType()), xTy);
  };
  const int64_t perSampleRows = s.rows / x.front();
  if (residual) {
    s.gateTokens = shared(s.gate, s.gatePerRow) ? s.rows : perSampleRows;
    if (plus >= 0)
      s.plusTokens = shared(plus, s.plusPerRow) ? s.rows : perSampleRows;
  }
  s.tokens = perSampleRows;
  if (shift >= 0) {
    bool shared1 = shared(shift, s.shiftPerRow);
    bool shared2 = shared(scale, s.scalePerRow);
    if (!s.shiftPerRow && !s.scalePerRow && shared1 != shared2) {
      c.kb.func.erase();
      return c.op->emitError() << "has no GPU implementation for a shift and "
                                  "scale of different broadcasts";
    }
    if (shared1 || shared2)
      s.tokens = s.rows;
  }
  if (c.bound)
    s.rowsPerItem = s.rows / x.front();
  return emitRowKernel(c.kb, s);
}

/// The row reductions' kernels (norms, softmax, reduce); nullopt when `n` is
/// not one.
std::optional<FailureOr<Launch>> emitRowOp(OpKernelContext &c, StringRef n) {
  if (n == "layer_norm")
    return emitLayerNorm(c.op, c.kb, c.shape(c.op->getOperand(0)));
  if (n == "layer_norm_modulate" || n == "gated_residual_norm")
    return emitFusedLayerNorm(c, n);
  if (n == "head_rms_norm") {
    SmallVector<int64_t> x = c.shape(c.op->getOperand(0));
    RowSpec s{RowKind::HeadRms, product(x) / x.back(), x.back()};
    s.gamma = 1;
    s.heads = x[x.size() - 2];
    s.x = 0;
    s.out = 2;
    if (c.bound)
      s.rowsPerItem = s.rows / x.front();
    return emitRowKernel(c.kb, s);
  }
  if (n == "softmax") {
    SmallVector<int64_t> x = c.shape(c.op->getOperand(0));
    int64_t axis = intAttrOr(c.op, "axis", -1);
    if (axis < 0)
      axis += int64_t(x.size());
    RowSpec s{RowKind::Softmax, 0, x[axis]};
    s.x = 0;
    s.out = 1;
    int64_t outer = product(ArrayRef(x).take_front(axis));
    int64_t inner = product(ArrayRef(x).drop_front(axis + 1));
    if (inner == 1) {
      s.rows = outer;
      return emitRowKernel(c.kb, s);
    }
    return emitAxisKernel(c.kb, s, outer, inner);
  }
  if (n == "reduce") {
    SmallVector<int64_t> x = c.shape(c.op->getOperand(0));
    int64_t axis = intAttrOr(c.op, "axis", -1);
    if (axis < 0)
      axis += int64_t(x.size());
    int64_t outer = product(ArrayRef(x).take_front(axis));
    return emitReduceKernel(
        c.kb, c.op->getAttrOfType<StringAttr>("kind").getValue(), outer,
        x[axis], product(ArrayRef(x).drop_front(axis + 1)),
        c.bound ? outer / x.front() : 0);
  }
  return std::nullopt;
}

/// split / concat along an axis.
FailureOr<Launch> emitSplitConcatOp(OpKernelContext &c, StringRef n) {
  bool isSplit = n == "split";
  Value whole = isSplit ? c.op->getOperand(0) : c.op->getResult(0);
  SmallVector<int64_t> shape = c.shape(whole);
  int64_t axis = intAttrOr(c.op, "axis", 0);
  if (axis < 0)
    axis += int64_t(shape.size());
  SmallVector<int64_t> sizes;
  SmallVector<unsigned> pieces;
  if (isSplit) {
    for (unsigned i = 0; i < c.op->getNumResults(); ++i) {
      sizes.push_back(c.shape(c.op->getResult(i))[axis]);
      pieces.push_back(1 + i);
    }
  } else {
    for (unsigned i = 0; i < c.nIn; ++i) {
      sizes.push_back(c.shape(c.op->getOperand(i))[axis]);
      pieces.push_back(i);
    }
  }
  return emitSplitConcat(c.kb, isSplit, isSplit ? 0 : c.nIn, pieces, sizes,
                         product(ArrayRef(shape).take_front(axis)),
                         product(ArrayRef(shape).drop_front(axis + 1)),
                         c.bound);
}

} // namespace

std::optional<unsigned> e4m3ResultOf(Operation *op) {
  const bool residual = isa<mlir::trellis::GatedResidualNormOp>(op);
  if (!residual && !isa<mlir::trellis::LayerNormModulateOp>(op))
    return std::nullopt;
  const unsigned result = residual ? 1 : 0;
  auto xTy = cast<RankedTensorType>(op->getOperand(0).getType());
  auto outTy = cast<RankedTensorType>(op->getResult(result).getType());
  const RowTiling tiling =
      rowTiling(xTy.getElementType(), xTy.getShape().back());
  if (!outTy.getElementType().isF16() || !tiling.inRegisters ||
      tiling.v % 2 != 0)
    return std::nullopt;
  // Its readers through reshapes: exactly one, an FP8 linear's input.
  SmallVector<Value> pending{op->getResult(result)};
  Operation *reader = nullptr;
  while (!pending.empty()) {
    Value v = pending.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (isa<mlir::trellis::ReshapeOp>(user)) {
        pending.push_back(user->getResult(0));
        continue;
      }
      if (reader || use.getOperandNumber() != 0)
        return std::nullopt;
      reader = user;
    }
  }
  auto linear = dyn_cast_or_null<mlir::trellis::LinearOp>(reader);
  auto precision =
      linear ? linear->getAttrOfType<StringAttr>("precision") : StringAttr();
  if (!precision || precision.getValue() != "fp8_e4m3" ||
      !linear->hasAttr("activation_amax"))
    return std::nullopt;
  return result;
}

FailureOr<Launch> emitOpKernel(Operation *op, gpu::GPUModuleOp module,
                               StringRef name,
                               std::optional<unsigned> e4m3Result) {
  StringRef n = op->getName().getStringRef();
  n.consume_front("trellis.");
  if (n == "gather_rows" || n == "segment_mean" ||
      n == "sparse.subdivide_features")
    return emitRowIndexKernel(op, n, module, name);
  if (n == "sparse.group_norm")
    return emitGroupNormApplyKernel(op, module, name);
  FailureOr<int64_t> bound = rowBound(op);
  if (failed(bound))
    return failure();
  if (*bound && !supportsDynamicRows(op))
    return op->emitError() << "has no GPU implementation for dynamic rows "
                              "(dimension 0 of "
                           << op->getResult(0).getType() << ")";
  if (failed(checkStatic(op, *bound)))
    return failure();
  const unsigned nIn = op->getNumOperands(), nOut = op->getNumResults();
  SmallVector<Type> args = tensorArgs(op, *bound);
  if (e4m3Result) { // the result's bytes, then its quantize scale
    auto &t = args[nIn + *e4m3Result];
    t = MemRefType::get(cast<MemRefType>(t).getShape(),
                        IntegerType::get(op->getContext(), 8));
    args.insert(args.begin() + nIn + nOut, Float32Type::get(op->getContext()));
  }
  KernelBuilder kb(module, name, args, op->getLoc());
  if (*bound)
    kb.bindRows(nIn + nOut + (e4m3Result ? 1 : 0), *bound);
  OpKernelContext c{op,
                    kb,
                    *bound,
                    nIn,
                    boundShape(op->getResult(0).getType(), *bound),
                    e4m3Result};
  if (e4m3Result) // only the fused layer norms (e4m3ResultOf)
    return emitFusedLayerNorm(c, n);
  if (auto l = emitElementwiseOp(c, n))
    return *l;
  if (auto l = emitRowOp(c, n))
    return *l;
  if (n == "timestep_embedding")
    return emitTimestepEmbedding(op, kb, module, name);
  if (n == "permute")
    return emitPermute(op, kb);
  if (n == "pixel_shuffle_3d")
    return emitPixelShuffle(op, kb);
  if (n == "split" || n == "concat")
    return emitSplitConcatOp(c, n);
  kb.func.erase();
  return op->emitError() << "has no GPU implementation";
}

} // namespace trellis::codegen::detail
