//===- ElementwiseOps.cpp - Elementwise ops of the CPU executor -----------===//
//
// Constants, casts, the unary and binary math ops, and the elementwise
// adaLN pieces (modulate, gated_residual), each on its reference kernel.
//
//===----------------------------------------------------------------------===//
#include "runtime/executor/CpuOps.h"

#include "trellis/Support/Half.h"

namespace trellis {
namespace cpu {
namespace {

using json = nlohmann::json;

/// A tensor of the result type filled from a constant attribute.
Result<HostTensor> constantValue(const Instr &instr) {
  const ValueType &type = instr.types.at(0);
  HostTensor out(type.dtype, type.shape);
  auto it = instr.attrs.find("value");
  if (it == instr.attrs.end() || !it->is_object())
    return Error{"attribute 'value' is missing"};
  int64_t n = out.numel();
  auto put = [&](int64_t i, double v) {
    switch (type.dtype) {
    case DType::F32:
      out.mutableData<float>()[i] = float(v);
      break;
    case DType::F16:
      out.mutableData<uint16_t>()[i] = floatToHalf(float(v));
      break;
    case DType::I32:
      out.mutableData<int32_t>()[i] = int32_t(v);
      break;
    case DType::I64:
      out.mutableData<int64_t>()[i] = int64_t(v);
      break;
    default:
      break;
    }
  };
  if (it->contains("splat")) {
    double v = (*it)["splat"].get<double>();
    for (int64_t i = 0; i < n; ++i)
      put(i, v);
  } else if (it->contains("dense") && (*it)["dense"].size() == size_t(n)) {
    const json &d = (*it)["dense"];
    for (int64_t i = 0; i < n; ++i)
      put(i, d[size_t(i)].get<double>());
  } else {
    return Error{"attribute 'value' does not match the result type"};
  }
  return out;
}

Status constantOp(const OpContext &ctx) {
  return ctx.single(constantValue(ctx.instr));
}

Status castOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &x, ctx.in.tensor(0));
  return ctx.single(ref::cast(x, ctx.instr.types.at(0).dtype));
}

Status modulateOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  TRELLIS_ASSIGN_OR_RETURN(auto &x, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &shift, in.tensor(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &scale, in.tensor(2));
  return ctx.single(ref::modulate(x, shift, scale));
}

Status gatedResidualOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  TRELLIS_ASSIGN_OR_RETURN(auto &x, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &h, in.tensor(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &gate, in.tensor(2));
  return ctx.single(ref::gatedResidual(x, h, gate));
}

} // namespace

void registerElementwiseOps(OpTable &table) {
  addOp(table, "trellis.constant", constantOp);
  addOp(table, "trellis.cast", castOp);
  static const std::pair<const char *, ref::BinaryKind> binaries[] = {
      {"trellis.add", ref::BinaryKind::Add},
      {"trellis.sub", ref::BinaryKind::Sub},
      {"trellis.mul", ref::BinaryKind::Mul},
      {"trellis.div", ref::BinaryKind::Div},
      {"trellis.maximum", ref::BinaryKind::Maximum},
      {"trellis.pow", ref::BinaryKind::Pow},
      {"trellis.greater", ref::BinaryKind::Greater},
      {"trellis.less", ref::BinaryKind::Less},
      {"trellis.equal", ref::BinaryKind::Equal}};
  addOp(table, "trellis.where", [](const OpContext &ctx) -> Status {
    TRELLIS_ASSIGN_OR_RETURN(auto &c, ctx.in.tensor(0));
    TRELLIS_ASSIGN_OR_RETURN(auto &a, ctx.in.tensor(1));
    TRELLIS_ASSIGN_OR_RETURN(auto &b, ctx.in.tensor(2));
    return ctx.single(ref::where(c, a, b));
  });
  for (auto [name, kind] : binaries)
    addOp(table, name, [kind = kind](const OpContext &ctx) -> Status {
      TRELLIS_ASSIGN_OR_RETURN(auto &a, ctx.in.tensor(0));
      TRELLIS_ASSIGN_OR_RETURN(auto &b, ctx.in.tensor(1));
      return ctx.single(ref::binary(kind, a, b));
    });
  static const std::pair<const char *, ref::UnaryKind> unaries[] = {
      {"trellis.silu", ref::UnaryKind::Silu},
      {"trellis.gelu", ref::UnaryKind::Gelu},
      {"trellis.gelu_erf", ref::UnaryKind::GeluErf},
      {"trellis.sigmoid", ref::UnaryKind::Sigmoid},
      {"trellis.tanh", ref::UnaryKind::Tanh},
      {"trellis.softplus", ref::UnaryKind::Softplus},
      {"trellis.atanh", ref::UnaryKind::Atanh},
      {"trellis.exp", ref::UnaryKind::Exp},
      {"trellis.log", ref::UnaryKind::Log},
      {"trellis.sin", ref::UnaryKind::Sin},
      {"trellis.cos", ref::UnaryKind::Cos},
      {"trellis.neg", ref::UnaryKind::Neg},
      {"trellis.sqrt", ref::UnaryKind::Sqrt},
      {"trellis.abs", ref::UnaryKind::Abs}};
  for (auto [name, kind] : unaries)
    addOp(table, name, [kind = kind](const OpContext &ctx) -> Status {
      TRELLIS_ASSIGN_OR_RETURN(auto &x, ctx.in.tensor(0));
      return ctx.single(ref::unary(kind, x));
    });
  addOp(table, "trellis.modulate", modulateOp);
  addOp(table, "trellis.gated_residual", gatedResidualOp);
}

} // namespace cpu
} // namespace trellis
