//===- LinearOps.cpp - Linear, matmul and conv ops of the CPU executor ----===//
//
// trellis.linear (with its fused residual or GELU epilogue, rounded as the
// unfused pair), trellis.matmul and the dense trellis.conv3d.
//
//===----------------------------------------------------------------------===//
#include "runtime/executor/CpuOps.h"

namespace trellis {
namespace cpu {
namespace {

Status linearOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  const Instr &instr = ctx.instr;
  TRELLIS_ASSIGN_OR_RETURN(auto &x, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &w, in.tensor(1));
  auto b = ctx.optTensor(2);
  // precision = "fp8_e4m3": the W8A8 E4M3 product (the GPU's FP8 GEMM,
  // emulated), with the static activation scale when the op has one;
  // "tf32" computes in f32 here.
  const bool fp8 = instr.hasAttr("precision") &&
                   instr.stringAttr("precision").value() == "fp8_e4m3";
  float activationAmax = 0.0f;
  if (fp8 && instr.hasAttr("activation_amax")) {
    TRELLIS_ASSIGN_OR_RETURN(double amax, instr.floatAttr("activation_amax"));
    activationAmax = float(amax);
  }
  if (fp8 && ctx.fp8Observer) {
    TRELLIS_ASSIGN_OR_RETURN(float amax, ref::e4m3Amax(x));
    (*ctx.fp8Observer)(instr, std::span<const float>(&amax, 1));
  }
  Result<HostTensor> y =
      fp8 ? ref::linearFp8(x, w, b ? &*b : nullptr, activationAmax)
          : ref::linear(x, w, b ? &*b : nullptr);
  if (in.size() > 3 && y) {
    // The residual (a bias comes with it: operand 3), added after the
    // rounding of x·Wᵀ + b as the unfused linear + add pair does.
    TRELLIS_ASSIGN_OR_RETURN(auto &residual, in.tensor(3));
    return ctx.single(ref::binary(ref::BinaryKind::Add, *y, residual));
  }
  if (!instr.hasAttr("activation") || !y)
    return ctx.single(std::move(y));
  // The fused epilogue, rounded as the unfused linear + gelu pair.
  TRELLIS_ASSIGN_OR_RETURN(auto &act, instr.stringAttr("activation"));
  if (act != "gelu_tanh")
    return Error{"unknown activation '" + act + "'"};
  return ctx.single(ref::unary(ref::UnaryKind::Gelu, *y));
}

Status matmulOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &a, ctx.in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &b, ctx.in.tensor(1));
  return ctx.single(ref::matmul(a, b));
}

Status conv3dOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &x, ctx.in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &w, ctx.in.tensor(1));
  auto b = ctx.optTensor(2);
  return ctx.single(
      ref::conv3d(x, w, b ? &*b : nullptr, intOr(ctx.instr, "padding", 1)));
}

} // namespace

void registerLinearOps(OpTable &table) {
  addOp(table, "trellis.linear", linearOp);
  addOp(table, "trellis.matmul", matmulOp);
  addOp(table, "trellis.conv3d", conv3dOp);
}

} // namespace cpu
} // namespace trellis
