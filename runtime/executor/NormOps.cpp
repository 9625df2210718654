//===- NormOps.cpp - Normalization ops of the CPU executor ----------------===//
//
// LayerNorm, head RMS norm and the sparse GroupNorm, and the fused norm ops
// (layer_norm_modulate, gated_residual_norm, linear_residual_norm), each
// rounded as the unfused ops it replaces.
//
//===----------------------------------------------------------------------===//
#include "runtime/executor/CpuOps.h"

namespace trellis {
namespace cpu {
namespace {

/// The part gated_residual_norm and linear_residual_norm share, as the
/// unfused ops: `residual` (already gated or added, rounded) plus the
/// optional added row, then the LayerNorm-modulate or LayerNorm of the
/// rounded residual (widened first when the result's dtype is wider:
/// f32_result). `sizes` are the op's operand segment sizes and `plusSegment`
/// the index of its plus segment (shift, scale, norm weight and norm bias
/// follow it); `next` is the operand number of the first optional operand.
Status residualNorm(const Operands &in, const std::vector<int64_t> &sizes,
                    size_t plusSegment, size_t next, HostTensor residual,
                    float eps, DType resultDtype, std::vector<RtValue> &out) {
  if (sizes[plusSegment]) {
    TRELLIS_ASSIGN_OR_RETURN(auto &plus, in.tensor(next++));
    TRELLIS_ASSIGN_OR_RETURN(auto &sum,
                             ref::binary(ref::BinaryKind::Add, residual, plus));
    residual = sum;
  }
  if (sizes[plusSegment + 1]) {
    TRELLIS_ASSIGN_OR_RETURN(auto &shift, in.tensor(next));
    TRELLIS_ASSIGN_OR_RETURN(auto &scale, in.tensor(next + 1));
    TRELLIS_ASSIGN_OR_RETURN(
        auto &normed, ref::layerNormModulate(residual, shift, scale, eps));
    out.push_back(residual);
    out.push_back(normed);
    return Status::ok();
  }
  std::optional<HostTensor> w, b;
  if (sizes[plusSegment + 3]) {
    TRELLIS_ASSIGN_OR_RETURN(auto &wt, in.tensor(next));
    TRELLIS_ASSIGN_OR_RETURN(auto &bt, in.tensor(next + 1));
    w = wt;
    b = bt;
  }
  HostTensor normIn = residual;
  if (resultDtype != residual.dtype()) {
    TRELLIS_ASSIGN_OR_RETURN(auto &wide, ref::cast(residual, resultDtype));
    normIn = wide;
  }
  TRELLIS_ASSIGN_OR_RETURN(
      auto &normed,
      ref::layerNorm(normIn, -1, eps, w ? &*w : nullptr, b ? &*b : nullptr));
  out.push_back(residual);
  out.push_back(normed);
  return Status::ok();
}

Status layerNormModulateOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  TRELLIS_ASSIGN_OR_RETURN(auto &x, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &shift, in.tensor(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &scale, in.tensor(2));
  TRELLIS_ASSIGN_OR_RETURN(auto &eps, ctx.instr.floatAttr("eps"));
  return ctx.single(ref::layerNormModulate(x, shift, scale, float(eps)));
}

Status gatedResidualNormOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  const Instr &instr = ctx.instr;
  // The unfused ops in turn: the norm reads the rounded residual.
  // Operands: x, h, gate, then the optional plus, shift + scale, weight +
  // bias (told apart by the operand segment sizes).
  TRELLIS_ASSIGN_OR_RETURN(auto &x, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &h, in.tensor(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &gate, in.tensor(2));
  TRELLIS_ASSIGN_OR_RETURN(auto &eps, instr.floatAttr("eps"));
  TRELLIS_ASSIGN_OR_RETURN(auto &sizes,
                           instr.intArrayAttr("operandSegmentSizes"));
  if (sizes.size() != 8)
    return Error{"gated_residual_norm: operandSegmentSizes must have 8 "
                 "entries"};
  TRELLIS_ASSIGN_OR_RETURN(auto &residual, ref::gatedResidual(x, h, gate));
  return residualNorm(in, sizes, 3, 3, residual, float(eps),
                      instr.types.at(1).dtype, ctx.out);
}

Status linearResidualNormOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  const Instr &instr = ctx.instr;
  // The unfused ops in turn, each rounded to x's dtype: linear, gated
  // residual (or add), plus, then the norm of the rounded residual.
  // Operands: input, weight, bias, x, then the optional gate, plus,
  // shift + scale, norm weight + bias (told apart by the operand segment
  // sizes).
  TRELLIS_ASSIGN_OR_RETURN(auto &a, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &w, in.tensor(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &bias, in.tensor(2));
  TRELLIS_ASSIGN_OR_RETURN(auto &x, in.tensor(3));
  TRELLIS_ASSIGN_OR_RETURN(auto &eps, instr.floatAttr("eps"));
  TRELLIS_ASSIGN_OR_RETURN(auto &sizes,
                           instr.intArrayAttr("operandSegmentSizes"));
  if (sizes.size() != 10)
    return Error{"linear_residual_norm: operandSegmentSizes must have 10 "
                 "entries"};
  TRELLIS_ASSIGN_OR_RETURN(auto &h, ref::linear(a, w, &bias));
  size_t next = 4;
  HostTensor residual;
  if (sizes[4]) {
    TRELLIS_ASSIGN_OR_RETURN(auto &gate, in.tensor(next++));
    TRELLIS_ASSIGN_OR_RETURN(auto &gated, ref::gatedResidual(x, h, gate));
    residual = gated;
  } else {
    // As trellis.linear … residual x: the rounded product plus x.
    TRELLIS_ASSIGN_OR_RETURN(auto &sum,
                             ref::binary(ref::BinaryKind::Add, h, x));
    residual = sum;
  }
  return residualNorm(in, sizes, 5, next, residual, float(eps),
                      instr.types.at(1).dtype, ctx.out);
}

Status layerNormOp(const OpContext &ctx) {
  const Instr &instr = ctx.instr;
  TRELLIS_ASSIGN_OR_RETURN(auto &x, ctx.in.tensor(0));
  auto w = ctx.optTensor(1), b = ctx.optTensor(2);
  TRELLIS_ASSIGN_OR_RETURN(auto &eps, instr.floatAttr("eps"));
  return ctx.single(ref::layerNorm(x, int(intOr(instr, "axis", -1)), float(eps),
                                   w ? &*w : nullptr, b ? &*b : nullptr));
}

Status headRmsNormOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &x, ctx.in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &g, ctx.in.tensor(1));
  return ctx.single(ref::headRmsNorm(x, g));
}

Status reduceOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &x, ctx.in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &kind, ctx.instr.stringAttr("kind"));
  return ctx.single(ref::reduce(x, kind, int(intOr(ctx.instr, "axis", -1)),
                                boolOr(ctx.instr, "keepdim", false)));
}

Status sparseGroupNormOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  const Instr &instr = ctx.instr;
  TRELLIS_ASSIGN_OR_RETURN(auto &f, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &c, in.coords(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &w, in.tensor(2));
  TRELLIS_ASSIGN_OR_RETURN(auto &b, in.tensor(3));
  TRELLIS_ASSIGN_OR_RETURN(auto &eps, instr.floatAttr("eps"));
  return ctx.single(ref::sparseGroupNorm(f, *c, intOr(instr, "groups", 32),
                                         float(eps), &w, &b));
}

} // namespace

void registerNormOps(OpTable &table) {
  addOp(table, "trellis.layer_norm_modulate", layerNormModulateOp);
  addOp(table, "trellis.gated_residual_norm", gatedResidualNormOp);
  addOp(table, "trellis.linear_residual_norm", linearResidualNormOp);
  addOp(table, "trellis.layer_norm", layerNormOp);
  addOp(table, "trellis.head_rms_norm", headRmsNormOp);
  addOp(table, "trellis.reduce", reduceOp);
  addOp(table, "trellis.sparse.group_norm", sparseGroupNormOp);
}

} // namespace cpu
} // namespace trellis
