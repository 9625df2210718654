//===- Elementwise.cpp - Elementwise kernels ------------------------------===//
//
//  * elementwise (casts, unary, binary with NumPy broadcasting, modulation,
//    the sampler update): V consecutive elements per thread with 16-byte
//    vector loads/stores when the innermost size allows (four such groups
//    per thread on large tensors, all loads before the first store);
//    broadcast operands are loaded as scalars and splatted;
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/KernelFamilies.h"

#include "llvm/ADT/StringSwitch.h"

namespace trellis::codegen::detail {

/// NumPy broadcasting of `in` against `out` (trailing dimensions aligned).
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> in,
                                      ArrayRef<int64_t> out) {
  SmallVector<int64_t> strides(out.size(), 0);
  int64_t s = 1;
  for (size_t k = 0; k < in.size() && k < out.size(); ++k) {
    size_t di = in.size() - 1 - k, d = out.size() - 1 - k;
    strides[d] = in[di] == 1 && out[d] != 1 ? 0 : s;
    s *= in[di];
  }
  return strides;
}

/// [B, C] broadcast over the tokens of x [B, ..., C], or x's own shape.
SmallVector<int64_t> perSampleStrides(ArrayRef<int64_t> v,
                                      ArrayRef<int64_t> x) {
  if (v == x)
    return broadcastStrides(v, x);
  SmallVector<int64_t> strides(x.size(), 0);
  strides.front() = x.back();
  strides.back() = 1;
  return strides;
}

/// Dynamic rows: whether a modulation vector `v` of x is per sample ([B, C]
/// over x [B, L, C], B dynamic or equal), rather than x-shaped or broadcast
/// by NumPy rules ([1, C], [C]).
bool isPerSampleVector(RankedTensorType v, RankedTensorType x) {
  return v.getRank() == 2 && x.getRank() == 3 && v.getDimSize(0) != 1 &&
         (v.isDynamicDim(0) || v.getDimSize(0) == x.getDimSize(0));
}

/// out[i] = body(operands at i): V consecutive elements per thread.
/// `computeF32`: operands are widened to f32 and the result rounded once.
/// Dynamic rows (kb.rows set, `outShape` the bound shape): V also divides
/// the elements of one dimension-0 row, one group per thread (T = row / V).
Launch emitElementwise(KernelBuilder &kb, ArrayRef<int64_t> outShape,
                       ArrayRef<EwOperand> operands, unsigned outArg,
                       bool computeF32, const EwBody &body) {
  // Drop size-1 dimensions and merge dimensions contiguous in every operand.
  SmallVector<int64_t> shape;
  SmallVector<SmallVector<int64_t>> strides(operands.size());
  for (size_t d = 0; d < outShape.size(); ++d) {
    if (outShape[d] == 1)
      continue;
    bool merge = !shape.empty();
    for (size_t i = 0; merge && i < operands.size(); ++i)
      merge = strides[i].back() == operands[i].strides[d] * outShape[d];
    if (merge) {
      shape.back() *= outShape[d];
      for (size_t i = 0; i < operands.size(); ++i)
        strides[i].back() = operands[i].strides[d];
      continue;
    }
    shape.push_back(outShape[d]);
    for (size_t i = 0; i < operands.size(); ++i)
      strides[i].push_back(operands[i].strides[d]);
  }
  if (shape.empty()) {
    shape.push_back(1);
    for (auto &s : strides)
      s.push_back(0);
  }
  // Vector width: 16 bytes of the narrowest type accessed contiguously.
  auto memTy = [&](unsigned a) {
    return cast<MemRefType>(kb.arg(a).getType()).getElementType();
  };
  int64_t minBytes = elemBytes(memTy(outArg));
  for (size_t i = 0; i < operands.size(); ++i)
    if (strides[i].back() == 1)
      minBytes = std::min(minBytes, elemBytes(memTy(operands[i].arg)));
  const bool dynamic = bool(kb.rows);
  const int64_t rowElems = dynamic ? product(outShape.drop_front()) : 0;
  int64_t v = pow2Divisor(shape.back(), 16 / minBytes);
  if (dynamic)
    v = std::min(v, pow2Divisor(rowElems, 16 / minBytes));
  const int64_t total = product(shape);
  const int64_t groups = total / v;
  // Large tensors: U groups per thread, T = groups / U apart (each access
  // still coalesced across the warp), every load issued before the first
  // store: more bytes in flight per thread and a single wave of blocks.
  // Dynamic rows: one group per thread (the spacing would depend on rows).
  const int64_t u =
      !dynamic && groups >= kUnrollMinGroups && groups % 4 == 0 ? 4 : 1;
  const int64_t threads = groups / u;

  Value gid = kb.globalId();
  kb.guard(dynamic ? kb.ult(gid, kb.rowsTimes(rowElems / v))
                   : kb.ult(gid, threads));
  auto loadAt = [&](Value flat) {
    // Multi-index of the group's first element, innermost first.
    SmallVector<Value> index(shape.size());
    Value rest = flat;
    for (int d = int(shape.size()) - 1; d >= 0; --d) {
      index[d] = d == 0 ? rest : kb.rem(rest, shape[d]);
      if (d > 0)
        rest = kb.div(rest, shape[d]);
    }
    SmallVector<Value> vals;
    for (size_t i = 0; i < operands.size(); ++i) {
      Value off = kb.idx(0);
      bool first = true;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (strides[i][d] == 0)
          continue;
        Value term = kb.mul(index[d], strides[i][d]);
        off = first ? term : kb.add(off, term);
        first = false;
      }
      Value mem = kb.arg(operands[i].arg);
      Value x = strides[i].back() == 1 ? kb.load(mem, off, v)
                                       : kb.splat(kb.load(mem, off, 1), v);
      vals.push_back(computeF32 ? kb.toF32(x) : x);
    }
    return vals;
  };
  SmallVector<Value> flats;
  SmallVector<SmallVector<Value>> vals;
  for (int64_t k = 0; k < u; ++k) {
    flats.push_back(kb.mul(kb.add(gid, kb.idx(k * threads)), v));
    vals.push_back(loadAt(flats.back()));
  }
  for (int64_t k = 0; k < u; ++k) {
    Value r = body(kb, vals[k], flats[k]);
    if (computeF32)
      r = kb.fromF32(r, memTy(outArg));
    kb.store(r, kb.arg(outArg), flats[k]);
  }
  Launch l = launch1d(threads);
  if (dynamic)
    l.threadsPerRow = rowElems / v;
  return l;
}

/// The reference's f32 formula of a unary op (runtime/reference/Elementwise).
Value unaryF32(KernelBuilder &kb, StringRef name, Value x) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type t = x.getType();
  auto one = [&] { return kb.f32(1.0, t); };
  auto sigmoidDenom = [&] { // 1 + exp(-x)
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
    return arith::AddFOp::create(b, loc, one(), e);
  };
  if (name == "silu")
    return arith::DivFOp::create(b, loc, x, sigmoidDenom());
  if (name == "sigmoid")
    return arith::DivFOp::create(b, loc, one(), sigmoidDenom());
  if (name == "gelu") {
    // 0.5·x·(1 + tanh(β·(x + κ·x·x·x))), in the reference's order.
    Value k = arith::MulFOp::create(b, loc, kb.f32(double(0.044715f), t), x);
    k = arith::MulFOp::create(b, loc, k, x);
    k = arith::MulFOp::create(b, loc, k, x);
    Value inner = arith::AddFOp::create(b, loc, x, k);
    inner = arith::MulFOp::create(
        b, loc, kb.f32(double(float(0.79788456080286535588)), t), inner);
    Value th = math::TanhOp::create(b, loc, inner);
    Value h = arith::MulFOp::create(b, loc, kb.f32(0.5, t), x);
    return arith::MulFOp::create(b, loc, h,
                                 arith::AddFOp::create(b, loc, one(), th));
  }
  if (name == "gelu_erf") {
    // 0.5·x·(1 + erf(x·(1/√2))), in the reference's order.
    Value e = math::ErfOp::create(
        b, loc,
        arith::MulFOp::create(
            b, loc, x, kb.f32(double(float(0.70710678118654752440)), t)));
    Value h = arith::MulFOp::create(b, loc, kb.f32(0.5, t), x);
    return arith::MulFOp::create(b, loc, h,
                                 arith::AddFOp::create(b, loc, one(), e));
  }
  if (name == "tanh")
    return math::TanhOp::create(b, loc, x);
  if (name == "softplus") {
    Value lin = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x,
                                      kb.f32(20.0, t));
    Value sp = math::Log1pOp::create(b, loc, math::ExpOp::create(b, loc, x));
    return arith::SelectOp::create(b, loc, lin, x, sp);
  }
  if (name == "atanh")
    return math::AtanhOp::create(b, loc, x);
  if (name == "exp")
    return math::ExpOp::create(b, loc, x);
  if (name == "log")
    return math::LogOp::create(b, loc, x);
  if (name == "sin")
    return math::SinOp::create(b, loc, x);
  if (name == "cos")
    return math::CosOp::create(b, loc, x);
  if (name == "neg")
    return arith::NegFOp::create(b, loc, x);
  if (name == "sqrt")
    return math::SqrtOp::create(b, loc, x);
  if (name == "abs")
    return math::AbsFOp::create(b, loc, x);
  return {};
}

bool isUnaryName(StringRef n) {
  return llvm::is_contained({"silu", "gelu", "gelu_erf", "sigmoid", "tanh",
                             "softplus", "atanh", "exp", "log", "sin", "cos",
                             "neg", "sqrt", "abs"},
                            n);
}

Value binary(KernelBuilder &kb, StringRef name, Value x, Value y, bool isInt) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  if (isInt) {
    if (name == "add")
      return arith::AddIOp::create(b, loc, x, y);
    if (name == "sub")
      return arith::SubIOp::create(b, loc, x, y);
    if (name == "mul")
      return arith::MulIOp::create(b, loc, x, y);
    if (name == "maximum")
      return arith::MaxSIOp::create(b, loc, x, y);
    if (auto pred =
            llvm::StringSwitch<std::optional<arith::CmpIPredicate>>(name)
                .Case("greater", arith::CmpIPredicate::sgt)
                .Case("less", arith::CmpIPredicate::slt)
                .Case("equal", arith::CmpIPredicate::eq)
                .Default(std::nullopt)) // 1 or 0 in x's type
      return arith::ExtUIOp::create(b, loc, x.getType(),
                                    arith::CmpIOp::create(b, loc, *pred, x, y));
    return {};
  }
  if (name == "add")
    return arith::AddFOp::create(b, loc, x, y);
  if (name == "sub")
    return arith::SubFOp::create(b, loc, x, y);
  if (name == "mul")
    return arith::MulFOp::create(b, loc, x, y);
  if (name == "div")
    return arith::DivFOp::create(b, loc, x, y);
  if (name == "maximum") // NaN propagates, as torch.maximum
    return arith::MaximumFOp::create(b, loc, x, y);
  if (name == "pow")
    return math::PowFOp::create(b, loc, x, y);
  // Ordered predicates: a NaN compares false; 1.0 or 0.0.
  if (auto pred = llvm::StringSwitch<std::optional<arith::CmpFPredicate>>(name)
                      .Case("greater", arith::CmpFPredicate::OGT)
                      .Case("less", arith::CmpFPredicate::OLT)
                      .Case("equal", arith::CmpFPredicate::OEQ)
                      .Default(std::nullopt))
    return arith::UIToFPOp::create(b, loc, x.getType(),
                                   arith::CmpFOp::create(b, loc, *pred, x, y));
  return {};
}

} // namespace trellis::codegen::detail
