//===- RowKernels.cpp - Row reduction kernels -----------------------------===//
//
//  * row reductions over the last axis (layer_norm, head_rms_norm, softmax,
//    layer_norm_modulate): G lanes (≤ 32, a power of two) per row, each
//    holding K vectors of V elements in registers, statistics in f32 reduced
//    with gpu.shuffle xor; the per-column parameters are loaded with x (a
//    layer norm's f32 γ / β staged in workgroup memory by the block); rows
//    too long for registers loop over the row;
//  * layer norm over another axis (the SS decoder's channel-first norm): the
//    block's threads split positions (vector accesses along the contiguous
//    inner axis) and channels, x held in registers, partial sums combined in
//    workgroup memory; one thread per position looping over the axis where
//    that does not fit (and for softmax);
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/KernelFamilies.h"

namespace trellis::codegen::detail {

namespace {

Value warpAllReduce(KernelBuilder &kb, Value v, int64_t lanes, bool isMax) {
  for (int64_t off = lanes / 2; off >= 1; off /= 2) {
    auto sh = gpu::ShuffleOp::create(kb.b, kb.loc, v, int32_t(off), 32,
                                     gpu::ShuffleMode::XOR);
    Value o = sh.getShuffleResult();
    v = isMax ? Value(arith::MaximumFOp::create(kb.b, kb.loc, v, o))
              : Value(arith::AddFOp::create(kb.b, kb.loc, v, o));
  }
  return v;
}

/// The row statistics the per-element output uses.
struct RowStats {
  Value mean, rstd; ///< layer norms
  Value denom;      ///< head_rms_norm: max(‖u‖, 1e-12)
  Value max, sum;   ///< softmax
};

/// The per-column parameters of a row kernel's output at V columns from
/// `col`, as loaded (f32 affine / head_rms_norm γ, the modulation's vectors
/// in their dtype). Loaded with the row, before the reduction, so that their
/// latency overlaps x's instead of following the statistics.
struct RowParams {
  Value gamma, beta, scale, shift;
};

/// `affine`: γ and β staged in workgroup memory by stageAffine, or null.
RowParams loadRowParams(KernelBuilder &kb, const RowSpec &s, Value row,
                        Value col, int64_t v, Value affine = {}) {
  RowParams p;
  switch (s.kind) {
  case RowKind::LayerNorm:
  case RowKind::LayerNormModulate: {
    if (s.gamma >= 0)
      p.gamma =
          affine ? kb.load(affine, col, v) : kb.load(kb.arg(s.gamma), col, v);
    if (s.beta >= 0)
      p.beta = affine ? kb.load(affine, kb.add(col, kb.idx(s.n)), v)
                      : kb.load(kb.arg(s.beta), col, v);
    if (s.kind == RowKind::LayerNormModulate) {
      auto off = [&](bool perRow) {
        return perRow ? kb.add(kb.mul(row, s.n), col)
                      : kb.add(kb.mul(kb.div(row, s.tokens), s.n), col);
      };
      p.scale = kb.load(kb.arg(s.scale), off(s.scalePerRow), v);
      p.shift = kb.load(kb.arg(s.shift), off(s.shiftPerRow), v);
    }
    break;
  }
  case RowKind::HeadRms:
    p.gamma = kb.load(kb.arg(s.gamma),
                      kb.add(kb.mul(kb.rem(row, s.heads), s.n), col), v);
    break;
  case RowKind::Softmax:
    break;
  }
  return p;
}

/// The per-element output of a row kernel from the f32 value x, the row
/// statistics and the column parameters of its V elements.
Value rowOutput(KernelBuilder &kb, const RowSpec &s, Value x,
                const RowStats &st, const RowParams &p, int64_t v) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type t = x.getType();
  auto bc = [&](Value scalar) { return kb.splat(scalar, v); };
  switch (s.kind) {
  case RowKind::LayerNorm:
  case RowKind::LayerNormModulate: {
    Value y = arith::MulFOp::create(
        b, loc, arith::SubFOp::create(b, loc, x, bc(st.mean)), bc(st.rstd));
    if (p.gamma)
      y = arith::MulFOp::create(b, loc, y, p.gamma);
    if (p.beta)
      y = arith::AddFOp::create(b, loc, y, p.beta);
    if (s.kind == RowKind::LayerNormModulate) {
      Value sc = kb.toF32(p.scale);
      Value sh = kb.toF32(p.shift);
      y = arith::MulFOp::create(
          b, loc, y, arith::AddFOp::create(b, loc, kb.f32(1, t), sc));
      y = arith::AddFOp::create(b, loc, y, sh);
    }
    return y;
  }
  case RowKind::HeadRms: {
    // u / max(‖u‖, 1e-12) · γ[h] · √d, in that order.
    Value y = arith::DivFOp::create(b, loc, x, bc(st.denom));
    y = arith::MulFOp::create(b, loc, y, p.gamma);
    return arith::MulFOp::create(
        b, loc, y, kb.f32(double(float(std::sqrt(double(s.n)))), t));
  }
  case RowKind::Softmax: {
    Value e = math::ExpOp::create(b, loc,
                                  arith::SubFOp::create(b, loc, x, bc(st.max)));
    return arith::DivFOp::create(b, loc, e, bc(st.sum));
  }
  }
  return {};
}

/// Sum (or max) of the V lanes of x, in lane order.
/// A layer norm's 1 / sqrt(Σ(x − mean)² / n + eps), f32 (the reference's
/// order of operations).
Value rstdOf(KernelBuilder &kb, Value sumSquares, Value n, float eps) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type f32 = b.getF32Type();
  Value var = arith::DivFOp::create(b, loc, sumSquares, n);
  Value sd = math::SqrtOp::create(
      b, loc, arith::AddFOp::create(b, loc, var, kb.f32(double(eps), f32)));
  return arith::DivFOp::create(b, loc, kb.f32(1.0, f32), sd);
}

Value horizontal(KernelBuilder &kb, Value x, int64_t v, bool isMax) {
  Value acc = kb.lane(x, 0);
  for (int64_t i = 1; i < v; ++i) {
    Value e = kb.lane(x, i);
    acc = isMax ? Value(arith::MaximumFOp::create(kb.b, kb.loc, acc, e))
                : Value(arith::AddFOp::create(kb.b, kb.loc, acc, e));
  }
  return acc;
}

/// Copies a layer norm's f32 γ (to [0, n)) and β (to [n, 2n)) into a
/// workgroup buffer, the block's threads sharing the copy; readable after the
/// next gpu.barrier. Per-thread registers for them would cost as much as x
/// (and halve the blocks per SM), and loads from global memory issued after
/// the first store of the output could not be moved above it.
Value stageAffine(KernelBuilder &kb, const RowSpec &s) {
  OpBuilder &b = kb.b;
  Value affine = kb.workgroupF32(2 * s.n);
  const int64_t vs = pow2Divisor(s.n, 4);
  Value tid = gpu::ThreadIdOp::create(b, kb.loc, gpu::Dimension::x);
  for (int64_t i = 0; i < ceilDiv(s.n, kBlock * vs); ++i) {
    OpBuilder::InsertionGuard ig(b);
    Value c = kb.add(kb.mul(tid, vs), kb.idx(i * kBlock * vs));
    if ((i + 1) * kBlock * vs > s.n)
      kb.guard(kb.ult(c, s.n));
    if (s.gamma >= 0)
      kb.store(kb.load(kb.arg(s.gamma), c, vs), affine, c);
    if (s.beta >= 0)
      kb.store(kb.load(kb.arg(s.beta), c, vs), affine, kb.add(c, kb.idx(s.n)));
  }
  return affine;
}

} // namespace

RowTiling rowTiling(Type xTy, int64_t n) {
  int64_t v = pow2Divisor(n, 16 / elemBytes(xTy));
  int64_t g = pow2Divisor(n / v, 32);
  int64_t k = n / (v * g);
  // Long rows with few lanes (C = 2^m·odd): trade vector width for lanes.
  while (k > 16 && v > 1 && g < 32 && (n / (v / 2)) % (g * 2) == 0) {
    v /= 2;
    g *= 2;
    k = n / (v * g);
  }
  if (k <= 32)
    return {v, g, k, true};
  return {1, 32, k, false};
}

namespace {

/// What both forms of a row kernel share: the row of this thread's lane
/// group (clamped; `valid` guards the stores) and where it starts.
struct RowContext {
  Type xTy, outTy;
  RowTiling tiling;
  int64_t threads;
  Value laneId, valid, rowc, base;
};

/// The row held in registers: K vectors of V elements per lane.
Launch emitRowInRegisters(KernelBuilder &kb, const RowSpec &s,
                          const RowContext &c) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  const Type xTy = c.xTy, outTy = c.outTy;
  const int64_t v = c.tiling.v, g = c.tiling.g, k = c.tiling.k;
  const int64_t threads = c.threads;
  const Value laneId = c.laneId, valid = c.valid, rowc = c.rowc, base = c.base;
  RowStats st;
  SmallVector<Value> xs, cols, residuals;
  SmallVector<RowParams> params;
  for (int64_t j = 0; j < k; ++j) {
    Value col = kb.add(kb.mul(laneId, v), kb.idx(j * g * v));
    cols.push_back(col);
    Value x = kb.toF32(kb.load(kb.arg(s.x), kb.add(base, col), v));
    if (s.h >= 0) { // x + gate·h, rounded as the gated_residual kernel does
      Value h = kb.toF32(kb.load(kb.arg(s.h), kb.add(base, col), v));
      Value gateOff =
          s.gatePerRow ? kb.add(base, col)
                       : kb.add(kb.mul(kb.div(rowc, s.gateTokens), s.n), col);
      Value gate = kb.toF32(kb.load(kb.arg(s.gate), gateOff, v));
      Value r =
          kb.fromF32(arith::AddFOp::create(
                         b, loc, x, arith::MulFOp::create(b, loc, gate, h)),
                     xTy);
      if (s.plus >= 0) {
        Value plusOff =
            s.plusPerRow ? kb.add(base, col)
                         : kb.add(kb.mul(kb.div(rowc, s.plusTokens), s.n), col);
        Value plus = kb.toF32(kb.load(kb.arg(s.plus), plusOff, v));
        r = kb.fromF32(arith::AddFOp::create(b, loc, kb.toF32(r), plus), xTy);
      }
      residuals.push_back(r);
      x = kb.toF32(r);
    }
    xs.push_back(x);
  }
  // The column parameters are loaded with x, so that their latency
  // overlaps x's instead of following the statistics; a layer norm's f32
  // γ / β go through workgroup memory (stageAffine).
  Value affine;
  if (s.kind == RowKind::LayerNorm && (s.gamma >= 0 || s.beta >= 0) &&
      s.n <= kMaxStagedAffine)
    affine = stageAffine(kb, s);
  else
    for (int64_t j = 0; j < k; ++j)
      params.push_back(loadRowParams(kb, s, rowc, cols[j], v));
  auto reduce = [&](function_ref<Value(Value)> f, bool isMax) {
    Value acc;
    for (Value x : xs) {
      Value h = horizontal(kb, f(x), v, isMax);
      acc = !acc    ? h
            : isMax ? Value(arith::MaximumFOp::create(b, loc, acc, h))
                    : Value(arith::AddFOp::create(b, loc, acc, h));
    }
    return warpAllReduce(kb, acc, g, isMax);
  };
  Value nF = kb.f32(double(s.n), b.getF32Type());
  switch (s.kind) {
  case RowKind::LayerNorm:
  case RowKind::LayerNormModulate: {
    Value sum = reduce([](Value x) { return x; }, false);
    st.mean = arith::DivFOp::create(b, loc, sum, nF);
    Value meanV = kb.splat(st.mean, v);
    Value sq = reduce(
        [&](Value x) {
          Value d = arith::SubFOp::create(b, loc, x, meanV);
          return Value(arith::MulFOp::create(b, loc, d, d));
        },
        false);
    st.rstd = rstdOf(kb, sq, nF, s.eps);
    break;
  }
  case RowKind::HeadRms: {
    Value ss = reduce(
        [&](Value x) { return Value(arith::MulFOp::create(b, loc, x, x)); },
        false);
    Value norm = math::SqrtOp::create(b, loc, ss);
    st.denom = arith::MaximumFOp::create(
        b, loc, norm, kb.f32(double(1e-12f), b.getF32Type()));
    break;
  }
  case RowKind::Softmax: {
    st.max = reduce([](Value x) { return x; }, true);
    Value maxV = kb.splat(st.max, v);
    st.sum = reduce(
        [&](Value x) {
          return Value(math::ExpOp::create(
              b, loc, arith::SubFOp::create(b, loc, x, maxV)));
        },
        false);
    break;
  }
  }
  if (affine) {
    gpu::BarrierOp::create(b, loc);
    for (int64_t j = 0; j < k; ++j)
      params.push_back(loadRowParams(kb, s, rowc, cols[j], v, affine));
  }
  kb.guard(valid);
  for (int64_t j = 0; j < k; ++j) {
    Value y = rowOutput(kb, s, xs[j], st, params[j], v);
    kb.store(s.quantize >= 0 ? kb.toE4M3(y, outTy, kb.arg(s.quantize))
                             : kb.fromF32(y, outTy),
             kb.arg(s.out), kb.add(base, cols[j]));
    if (s.residualOut >= 0)
      kb.store(residuals[j], kb.arg(s.residualOut), kb.add(base, cols[j]));
  }
  Launch l = launch1d(threads);
  if (kb.rows)
    l.threadsPerRow = s.rowsPerItem * g;
  return l;
}

/// Long rows: 32 lanes stride over the row, reading it again for each
/// statistic.
Launch emitRowLooped(KernelBuilder &kb, const RowSpec &s, const RowContext &c) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  const Type outTy = c.outTy;
  const int64_t g = c.tiling.g;
  const int64_t threads = c.threads;
  const Value laneId = c.laneId, valid = c.valid, rowc = c.rowc, base = c.base;
  RowStats st;
  auto loopReduce = [&](function_ref<Value(Value)> f, bool isMax) {
    Value init = kb.f32(isMax ? -INFINITY : 0.0, b.getF32Type());
    auto loop = scf::ForOp::create(
        b, loc, laneId, kb.idx(s.n), kb.idx(g), ValueRange{init},
        [&](OpBuilder &nb, Location l, Value j, ValueRange acc) {
          OpBuilder::InsertionGuard ig(kb.b);
          kb.b.setInsertionPoint(nb.getInsertionBlock(),
                                 nb.getInsertionPoint());
          Value x = kb.toF32(kb.load(kb.arg(s.x), kb.add(base, j), 1));
          Value fx = f(x);
          Value next =
              isMax ? Value(arith::MaximumFOp::create(kb.b, l, acc[0], fx))
                    : Value(arith::AddFOp::create(kb.b, l, acc[0], fx));
          scf::YieldOp::create(kb.b, l, next);
        });
    return warpAllReduce(kb, loop.getResult(0), g, isMax);
  };
  Value nF = kb.f32(double(s.n), b.getF32Type());
  switch (s.kind) {
  case RowKind::LayerNorm:
  case RowKind::LayerNormModulate: {
    st.mean = arith::DivFOp::create(
        b, loc, loopReduce([](Value x) { return x; }, false), nF);
    Value mean = st.mean;
    Value sq = loopReduce(
        [&](Value x) {
          Value d = arith::SubFOp::create(kb.b, kb.loc, x, mean);
          return Value(arith::MulFOp::create(kb.b, kb.loc, d, d));
        },
        false);
    st.rstd = rstdOf(kb, sq, nF, s.eps);
    break;
  }
  case RowKind::HeadRms: {
    Value ss = loopReduce(
        [&](Value x) {
          return Value(arith::MulFOp::create(kb.b, kb.loc, x, x));
        },
        false);
    st.denom =
        arith::MaximumFOp::create(b, loc, math::SqrtOp::create(b, loc, ss),
                                  kb.f32(double(1e-12f), b.getF32Type()));
    break;
  }
  case RowKind::Softmax: {
    st.max = loopReduce([](Value x) { return x; }, true);
    Value mx = st.max;
    st.sum = loopReduce(
        [&](Value x) {
          return Value(math::ExpOp::create(
              kb.b, kb.loc, arith::SubFOp::create(kb.b, kb.loc, x, mx)));
        },
        false);
    break;
  }
  }
  kb.guard(valid);
  scf::ForOp::create(
      b, loc, laneId, kb.idx(s.n), kb.idx(g), ValueRange{},
      [&](OpBuilder &nb, Location l, Value j, ValueRange) {
        OpBuilder::InsertionGuard ig(kb.b);
        kb.b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        Value x = kb.toF32(kb.load(kb.arg(s.x), kb.add(base, j), 1));
        Value y = rowOutput(kb, s, x, st, loadRowParams(kb, s, rowc, j, 1), 1);
        kb.store(kb.fromF32(y, outTy), kb.arg(s.out), kb.add(base, j));
        scf::YieldOp::create(kb.b, l);
      });
  Launch l = launch1d(threads);
  if (kb.rows)
    l.threadsPerRow = s.rowsPerItem * g;
  return l;
}

} // namespace

Launch emitRowKernel(KernelBuilder &kb, const RowSpec &s) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type xTy = cast<MemRefType>(kb.arg(s.x).getType()).getElementType();
  Type outTy = s.quantize >= 0
                   ? Type(b.getF16Type()) // rounded to, then stored as E4M3
                   : cast<MemRefType>(kb.arg(s.out).getType()).getElementType();
  const RowTiling tiling = rowTiling(xTy, s.n);
  assert((s.quantize < 0 || (tiling.inRegisters && tiling.v % 2 == 0)) &&
         "E4M3 stores are of register rows, in pairs (e4m3ResultOf)");
  const int64_t g = tiling.g;
  const bool inRegisters = tiling.inRegisters;
  assert((inRegisters || s.h < 0) && "a residual row kernel needs registers");
  const int64_t threads = s.rows * g;

  Value gid = kb.globalId();
  Value row = kb.div(gid, g);
  Value laneId = kb.rem(gid, g);
  // Every lane takes part in the shuffles: rows past the end are clamped and
  // only the stores are guarded. Dynamic rows: clamped to the actual rows,
  // and with no rows the whole (one-block) grid returns at once.
  Value valid, rowc;
  if (kb.rows) {
    kb.guard(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, kb.rows,
                                   kb.idx(0)));
    Value n = kb.rowsTimes(s.rowsPerItem);
    valid = kb.ult(row, n);
    rowc = arith::MinUIOp::create(b, loc, row,
                                  arith::SubIOp::create(b, loc, n, kb.idx(1)));
  } else {
    valid = kb.ult(row, s.rows);
    rowc = arith::MinUIOp::create(b, loc, row, kb.idx(s.rows - 1));
  }
  Value base = kb.mul(rowc, s.n);
  RowContext c{xTy, outTy, tiling, threads, laneId, valid, rowc, base};
  return inRegisters ? emitRowInRegisters(kb, s, c) : emitRowLooped(kb, s, c);
}

/// Normalization / softmax over a non-last axis of x viewed as
/// [outer, n, inner]: one thread per (outer, inner) position.
Launch emitAxisKernel(KernelBuilder &kb, const RowSpec &s, int64_t outer,
                      int64_t inner) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type outTy = cast<MemRefType>(kb.arg(s.out).getType()).getElementType();
  const int64_t items = outer * inner;
  Value gid = kb.globalId();
  kb.guard(kb.ult(gid, items));
  Value base =
      kb.add(kb.mul(kb.div(gid, inner), s.n * inner), kb.rem(gid, inner));
  Type f32 = b.getF32Type();
  auto at = [&](Value j) { return kb.add(base, kb.mul(j, inner)); };
  auto loopReduce = [&](function_ref<Value(Value)> f, bool isMax) {
    Value init = kb.f32(isMax ? -INFINITY : 0.0, f32);
    auto loop = scf::ForOp::create(
        b, loc, kb.idx(0), kb.idx(s.n), kb.idx(1), ValueRange{init},
        [&](OpBuilder &nb, Location l, Value j, ValueRange acc) {
          OpBuilder::InsertionGuard ig(kb.b);
          kb.b.setInsertionPoint(nb.getInsertionBlock(),
                                 nb.getInsertionPoint());
          Value fx = f(kb.toF32(kb.load(kb.arg(s.x), at(j), 1)));
          Value next =
              isMax ? Value(arith::MaximumFOp::create(kb.b, l, acc[0], fx))
                    : Value(arith::AddFOp::create(kb.b, l, acc[0], fx));
          scf::YieldOp::create(kb.b, l, next);
        });
    return loop.getResult(0);
  };
  Value nF = kb.f32(double(s.n), f32);
  RowStats st;
  if (s.kind == RowKind::Softmax) {
    st.max = loopReduce([](Value x) { return x; }, true);
    Value mx = st.max;
    st.sum = loopReduce(
        [&](Value x) {
          return Value(math::ExpOp::create(
              kb.b, kb.loc, arith::SubFOp::create(kb.b, kb.loc, x, mx)));
        },
        false);
  } else {
    st.mean = arith::DivFOp::create(
        b, loc, loopReduce([](Value x) { return x; }, false), nF);
    Value mean = st.mean;
    Value sq = loopReduce(
        [&](Value x) {
          Value d = arith::SubFOp::create(kb.b, kb.loc, x, mean);
          return Value(arith::MulFOp::create(kb.b, kb.loc, d, d));
        },
        false);
    st.rstd = rstdOf(kb, sq, nF, s.eps);
  }
  scf::ForOp::create(
      b, loc, kb.idx(0), kb.idx(s.n), kb.idx(1), ValueRange{},
      [&](OpBuilder &nb, Location l, Value j, ValueRange) {
        OpBuilder::InsertionGuard ig(kb.b);
        kb.b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        Value x = kb.toF32(kb.load(kb.arg(s.x), at(j), 1));
        Value y =
            rowOutput(kb, s, x, st, loadRowParams(kb, s, Value(), j, 1), 1);
        kb.store(kb.fromF32(y, outTy), kb.arg(s.out), at(j));
        scf::YieldOp::create(kb.b, l);
      });
  return launch1d(items);
}

Launch emitReduceKernel(KernelBuilder &kb, StringRef kind, int64_t outer,
                        int64_t n, int64_t inner, int64_t outerPerRow) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type f32 = b.getF32Type();
  Type outTy = cast<MemRefType>(kb.arg(1).getType()).getElementType();
  const bool isMax = kind == "max";
  const int64_t lanes = inner == 1 ? 32 : 1;
  const int64_t items = outer * inner;
  Value gid = kb.globalId();
  Value active = kb.rows ? kb.rowsTimes(outerPerRow * inner * lanes)
                         : kb.idx(items * lanes);
  kb.guard(kb.ult(gid, active)); // whole warps: lanes · items is a multiple
  Value item = kb.div(gid, lanes);
  Value lane = kb.rem(gid, lanes);
  Value base =
      kb.add(kb.mul(kb.div(item, inner), n * inner), kb.rem(item, inner));
  auto combine = [&](Value acc, Value x) -> Value {
    if (isMax) // NaN propagates, as the reference
      return arith::MaximumFOp::create(b, loc, acc, x);
    return arith::AddFOp::create(b, loc, acc, x);
  };
  Value init = kb.f32(isMax ? -INFINITY : 0.0, f32);
  auto loop = scf::ForOp::create(
      b, loc, lane, kb.idx(n), kb.idx(lanes), ValueRange{init},
      [&](OpBuilder &nb, Location l, Value j, ValueRange acc) {
        OpBuilder::InsertionGuard ig(kb.b);
        kb.b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        Value x =
            kb.toF32(kb.load(kb.arg(0), kb.add(base, kb.mul(j, inner)), 1));
        scf::YieldOp::create(kb.b, l, combine(acc[0], x));
      });
  Value r = loop.getResult(0);
  if (lanes > 1)
    r = warpAllReduce(kb, r, lanes, isMax);
  if (kind == "mean")
    r = arith::DivFOp::create(b, loc, r, kb.f32(double(n), f32));
  if (lanes > 1)
    kb.guard(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                   kb.idx(0)));
  kb.store(kb.fromF32(r, outTy), kb.arg(1), item);
  Launch l = launch1d(items * lanes);
  if (kb.rows)
    l.threadsPerRow = outerPerRow * inner * lanes;
  return l;
}

/// Layer norm over a non-last axis of x viewed as [outer, n, inner], the
/// channels split across the block: P threads of a block take P position
/// groups (V consecutive inner positions each, one vector access), the
/// 256 / P = S slices of the block split the n channels (channel c to slice
/// c % S), so a thread holds kc = n / S vectors in registers and x is read
/// once. Partial sums meet in workgroup memory. Returns failure when no
/// configuration keeps kc · V ≤ 32 values per thread, or γ / β are too long
/// to stage.
FailureOr<Launch> emitChannelSplitLayerNorm(KernelBuilder &kb, const RowSpec &s,
                                            int64_t outer, int64_t inner) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type xTy = cast<MemRefType>(kb.arg(s.x).getType()).getElementType();
  Type outTy = cast<MemRefType>(kb.arg(s.out).getType()).getElementType();
  const int64_t eb = std::max(elemBytes(xTy), elemBytes(outTy));
  const int64_t vMax = pow2Divisor(inner, 16 / eb);
  // Most contiguous bytes per channel and warp (up to a 128-byte line), then
  // the fewest slices (the cross-slice sum reads one vector per slice), each
  // P with its widest vector.
  int64_t p = 0, v = 0, bestScore = -1;
  for (int64_t pc = kBlock; pc >= 1; pc /= 2) {
    const int64_t slices = kBlock / pc;
    if (s.n % slices)
      continue;
    for (int64_t vc = vMax; vc >= 1; vc /= 2) {
      if (s.n / slices * vc > 32)
        continue;
      int64_t score =
          std::min<int64_t>(std::min<int64_t>(pc, 32) * vc * eb, 128);
      if (score > bestScore) {
        bestScore = score;
        p = pc;
        v = vc;
      }
      break;
    }
  }
  if (bestScore < 0 ||
      ((s.gamma >= 0 || s.beta >= 0) && s.n > kMaxStagedAffine))
    return failure();
  const int64_t slices = kBlock / p, kc = s.n / slices;
  const int64_t groupsPerOuter = inner / v, groups = outer * groupsPerOuter;
  Type f32 = b.getF32Type();
  auto vecTy = v == 1 ? f32 : Type(VectorType::get({v}, f32));
  Value smem = kb.workgroupF32(2 * kBlock * v);

  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value bid = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value pos = kb.rem(tid, p), slice = kb.div(tid, p);
  Value group = kb.add(kb.mul(bid, p), pos);
  // Every thread takes part in the barriers: groups past the end are
  // clamped and only the stores are guarded.
  Value valid = kb.ult(group, groups);
  Value groupc = arith::MinUIOp::create(b, loc, group, kb.idx(groups - 1));
  Value base = kb.add(kb.mul(kb.div(groupc, groupsPerOuter), s.n * inner),
                      kb.mul(kb.rem(groupc, groupsPerOuter), v));
  SmallVector<Value> xs, offs;
  for (int64_t i = 0; i < kc; ++i) {
    Value c = kb.add(slice, kb.idx(i * slices));
    offs.push_back(kb.add(base, kb.mul(c, inner)));
    xs.push_back(kb.toF32(kb.load(kb.arg(s.x), offs.back(), v)));
  }
  // γ / β through workgroup memory (stageAffine; the first blockSum's
  // barrier publishes them).
  Value affine;
  if (s.gamma >= 0 || s.beta >= 0)
    affine = stageAffine(kb, s);
  // The block-wide sum over the channels of f(x), per position (lane order:
  // each slice's channels in order, then the slices in order).
  auto blockSum = [&](function_ref<Value(Value)> f, int64_t half) {
    Value acc;
    for (Value x : xs) {
      Value fx = f(x);
      acc = acc ? Value(arith::AddFOp::create(b, loc, acc, fx)) : fx;
    }
    kb.store(acc, smem, kb.add(kb.mul(tid, v), kb.idx(half * kBlock * v)));
    gpu::BarrierOp::create(b, loc);
    Value total;
    for (int64_t j = 0; j < slices; ++j) {
      Value part = kb.load(
          smem, kb.add(kb.mul(pos, v), kb.idx((half * kBlock + j * p) * v)), v);
      total = total ? Value(arith::AddFOp::create(b, loc, total, part)) : part;
    }
    return total;
  };
  Value nF = kb.f32(double(s.n), vecTy);
  Value mean =
      arith::DivFOp::create(b, loc, blockSum([](Value x) { return x; }, 0), nF);
  Value sq = blockSum(
      [&](Value x) {
        Value d = arith::SubFOp::create(b, loc, x, mean);
        return Value(arith::MulFOp::create(b, loc, d, d));
      },
      1);
  Value var = arith::DivFOp::create(b, loc, sq, nF);
  Value sd = math::SqrtOp::create(
      b, loc, arith::AddFOp::create(b, loc, var, kb.f32(double(s.eps), vecTy)));
  Value rstd = arith::DivFOp::create(b, loc, kb.f32(1.0, vecTy), sd);
  kb.guard(valid);
  for (int64_t i = 0; i < kc; ++i) {
    Value y = arith::MulFOp::create(
        b, loc, arith::SubFOp::create(b, loc, xs[i], mean), rstd);
    Value c = kb.add(slice, kb.idx(i * slices));
    if (s.gamma >= 0)
      y = arith::MulFOp::create(b, loc, y, kb.splat(kb.load(affine, c, 1), v));
    if (s.beta >= 0)
      y = arith::AddFOp::create(
          b, loc, y, kb.splat(kb.load(affine, kb.add(c, kb.idx(s.n)), 1), v));
    kb.store(kb.fromF32(y, outTy), kb.arg(s.out), offs[i]);
  }
  Launch l;
  l.block = {kBlock, 1, 1};
  l.grid = {ceilDiv(groups, p), 1, 1};
  return l;
}

} // namespace trellis::codegen::detail
