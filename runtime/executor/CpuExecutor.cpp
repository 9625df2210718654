//===- CpuExecutor.cpp - Runs a host program on the CPU reference -----------===//
#include "trellis/Runtime/CpuExecutor.h"

#include "trellis/Support/Half.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

namespace trellis {

using json = nlohmann::json;
using CoordsPtr = std::shared_ptr<const ref::CoordSet>;
using SegmentsPtr = std::shared_ptr<const ref::Segments>;

struct CpuExecutor::Frame {
  const Function &fn;
  std::vector<RtValue> slots;
};

CpuExecutor::CpuExecutor(const Program &program, WeightProvider weights)
    : program_(program), weights_(std::move(weights)) {}

void CpuExecutor::setSamplerOverrides(const std::string &function,
                                      SamplerRunOverrides overrides) {
  overrides_[function] = overrides;
}

Error CpuExecutor::opError(const Instr &instr,
                           const std::string &message) const {
  return Error{"error in '" + instr.op + "' " + program_.describe(instr.loc) +
               ": " + message};
}

//===----------------------------------------------------------------------===//
// Functions
//===----------------------------------------------------------------------===//

Status CpuExecutor::checkArgument(const Function &fn, size_t i,
                                  const RtValue &v) const {
  const ValueType &type = fn.argTypes[i];
  std::string what = "argument " + std::to_string(i) + " of '" + fn.name + "'";
  if (type.kind != ValueType::Kind::Tensor)
    return Status::ok();
  const HostTensor *t = std::get_if<HostTensor>(&v);
  if (!t)
    return Error{what + ": expected a tensor"};
  if (t->dtype() != type.dtype || t->rank() != int(type.shape.size()))
    return Error{what + ": expected " + type.str() + ", found " +
                 shapeToString(t->shape()) + " " +
                 std::string(dtypeName(t->dtype()))};
  size_t dyn = 0;
  for (int d = 0; d < t->rank(); ++d) {
    int64_t want = type.shape[d];
    if (want >= 0 && t->dim(d) != want)
      return Error{what + ": expected " + type.str() + ", found " +
                   shapeToString(t->shape())};
    if (want < 0 && dyn < type.bounds.size() && t->dim(d) > type.bounds[dyn++])
      return Error{what + ": dimension " + std::to_string(d) + " is " +
                   std::to_string(t->dim(d)) + ", above the compiled bound " +
                   std::to_string(type.bounds[dyn - 1])};
  }
  return Status::ok();
}

Result<std::vector<RtValue>> CpuExecutor::run(const std::string &name,
                                              std::vector<RtValue> args) {
  const Function *fn = program_.find(name);
  if (!fn || !program_.hasEntry(name))
    return Error{"the program has no entry function '" + name + "'"};
  entry_ = name;
  return call(*fn, std::move(args));
}

Result<std::vector<RtValue>> CpuExecutor::call(const Function &fn,
                                               std::vector<RtValue> args) {
  if (args.size() != fn.args.size())
    return Error{"'" + fn.name + "' takes " + std::to_string(fn.args.size()) +
                 " arguments, " + std::to_string(args.size()) + " given"};
  Frame frame{fn, std::vector<RtValue>(size_t(fn.numSlots))};
  for (size_t i = 0; i < args.size(); ++i) {
    if (Status s = checkArgument(fn, i, args[i]); !s)
      return s.message().empty() ? Error{"bad argument"} : Error{s.message()};
    frame.slots[fn.args[i]] = std::move(args[i]);
  }
  if (Status s = runBody(frame, fn.body); !s)
    return Error{s.message()};
  std::vector<RtValue> results;
  for (int slot : fn.results)
    results.push_back(frame.slots[slot]);
  return results;
}

Result<std::vector<RtValue>>
CpuExecutor::evalOp(const Program &program, const Instr &instr,
                    std::vector<RtValue> inputs) {
  if (inputs.size() != instr.in.size())
    return Error{"evalOp: '" + instr.op + "' takes " +
                 std::to_string(instr.in.size()) + " operands, " +
                 std::to_string(inputs.size()) + " given"};
  if (!instr.regions.empty() || instr.op == "func.call")
    return Error{"evalOp: '" + instr.op + "' is not a single op"};
  int numSlots = 0;
  for (int s : instr.in)
    numSlots = std::max(numSlots, s + 1);
  for (int s : instr.out)
    numSlots = std::max(numSlots, s + 1);
  static const Function kNoFunction;
  CpuExecutor exec(program, nullptr);
  Frame frame{kNoFunction, std::vector<RtValue>(size_t(numSlots))};
  for (size_t i = 0; i < inputs.size(); ++i)
    frame.slots[instr.in[i]] = std::move(inputs[i]);
  if (Status s = exec.runOp(frame, instr); !s)
    return Error{s.message()};
  std::vector<RtValue> results;
  for (int s : instr.out)
    results.push_back(std::move(frame.slots[s]));
  return results;
}

Status CpuExecutor::runBody(Frame &frame, const std::vector<Instr> &body) {
  for (const Instr &instr : body)
    if (Status s = runOp(frame, instr); !s)
      return s;
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

namespace {

/// Operand access with the op's name in errors.
struct Operands {
  const Instr &instr;
  std::vector<RtValue> &slots;

  size_t size() const { return instr.in.size(); }
  Result<HostTensor> tensor(size_t i) const {
    if (i >= instr.in.size())
      return Error{"missing operand " + std::to_string(i)};
    if (auto *t = std::get_if<HostTensor>(&slots[instr.in[i]]))
      return *t;
    return Error{"operand " + std::to_string(i) + " is not a tensor"};
  }
  Result<CoordsPtr> coords(size_t i) const {
    if (i < instr.in.size())
      if (auto *c = std::get_if<CoordsPtr>(&slots[instr.in[i]]))
        return *c;
    return Error{"operand " + std::to_string(i) + " is not a coordinate set"};
  }
  Result<SegmentsPtr> segments(size_t i) const {
    if (i < instr.in.size())
      if (auto *s = std::get_if<SegmentsPtr>(&slots[instr.in[i]]))
        return *s;
    return Error{"operand " + std::to_string(i) + " is not a segment set"};
  }
};

#define TRY(var, expr)                                                         \
  auto var##OrErr = (expr);                                                    \
  if (!var##OrErr)                                                             \
    return var##OrErr.takeError();                                             \
  auto &var = *var##OrErr;

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
    TRY(plus, in.tensor(next++));
    TRY(sum, ref::binary(ref::BinaryKind::Add, residual, plus));
    residual = sum;
  }
  if (sizes[plusSegment + 1]) {
    TRY(shift, in.tensor(next));
    TRY(scale, in.tensor(next + 1));
    TRY(normed, ref::layerNormModulate(residual, shift, scale, eps));
    out.push_back(residual);
    out.push_back(normed);
    return Status::ok();
  }
  std::optional<HostTensor> w, b;
  if (sizes[plusSegment + 3]) {
    TRY(wt, in.tensor(next));
    TRY(bt, in.tensor(next + 1));
    w = wt;
    b = bt;
  }
  HostTensor normIn = residual;
  if (resultDtype != residual.dtype()) {
    TRY(wide, ref::cast(residual, resultDtype));
    normIn = wide;
  }
  TRY(normed,
      ref::layerNorm(normIn, -1, eps, w ? &*w : nullptr, b ? &*b : nullptr));
  out.push_back(residual);
  out.push_back(normed);
  return Status::ok();
}

int64_t intOr(const Instr &i, const char *name, int64_t fallback) {
  auto v = i.intAttr(name);
  return v ? *v : fallback;
}
double floatOr(const Instr &i, const char *name, double fallback) {
  auto v = i.floatAttr(name);
  return v ? *v : fallback;
}

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

/// Repeats a batch-1 condition to `batch` rows (TRELLIS's sampler does).
Result<HostTensor> repeatBatch(const HostTensor &c, int64_t batch) {
  if (c.dim(0) == batch)
    return c;
  if (c.dim(0) != 1)
    return Error{"condition batch " + std::to_string(c.dim(0)) +
                 " is neither 1 nor the model batch " + std::to_string(batch)};
  std::vector<HostTensor> parts(size_t(batch), c);
  return ref::concat(parts, 0);
}

/// Row `i` of a tensor along dim 0, keeping the dimension.
Result<HostTensor> row(const HostTensor &c, int64_t i) {
  std::vector<int64_t> sizes;
  for (int64_t k = 0; k < c.dim(0); ++k)
    sizes.push_back(1);
  auto parts = ref::split(c, 0, sizes);
  if (!parts)
    return parts.takeError();
  return (*parts)[size_t(i)];
}

bool allFinite(const HostTensor &t) {
  if (t.dtype() == DType::F32) {
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t.data<float>()[i]))
        return false;
  } else if (t.dtype() == DType::F16) {
    for (int64_t i = 0; i < t.numel(); ++i)
      if ((t.data<uint16_t>()[i] & 0x7c00) == 0x7c00)
        return false;
  }
  return true;
}

} // namespace

Status CpuExecutor::runOp(Frame &frame, const Instr &instr) {
  if (instr.op == "trellis.flow_sample")
    return runFlowSample(frame, instr);
  Operands in{instr, frame.slots};
  std::vector<RtValue> out;
  // Each case fills `out` or returns an error (wrapped with the location).
  auto result = [&]() -> Status {
    const std::string &op = instr.op;
    auto single = [&](Result<HostTensor> r) -> Status {
      if (!r)
        return Error{r.message()};
      out.push_back(std::move(r).value());
      return Status::ok();
    };
    auto optTensor = [&](size_t i) -> std::optional<HostTensor> {
      auto t = in.tensor(i);
      if (t)
        return *t;
      return std::nullopt;
    };
    if (op == "func.call") {
      TRY(callee, instr.stringAttr("callee"));
      const Function *fn = program_.find(callee);
      if (!fn)
        return Error{"calls '" + callee + "', which the program lacks"};
      std::vector<RtValue> args;
      for (int slot : instr.in)
        args.push_back(frame.slots[slot]);
      TRY(results, call(*fn, std::move(args)));
      out = std::move(results);
      return Status::ok();
    }
    if (op == "trellis.weight") {
      TRY(name, instr.stringAttr("name"));
      TRY(model, instr.stringAttr("model"));
      return single(weights_(model, name));
    }
    if (op == "trellis.constant")
      return single(constantValue(instr));
    if (op == "trellis.cast") {
      TRY(x, in.tensor(0));
      return single(ref::cast(x, instr.types.at(0).dtype));
    }
    if (op == "trellis.linear") {
      TRY(x, in.tensor(0));
      TRY(w, in.tensor(1));
      auto b = optTensor(2);
      Result<HostTensor> y = ref::linear(x, w, b ? &*b : nullptr);
      if (in.size() > 3 && y) {
        // The residual (a bias comes with it: operand 3), added after the
        // rounding of x·Wᵀ + b as the unfused linear + add pair does.
        TRY(residual, in.tensor(3));
        return single(ref::binary(ref::BinaryKind::Add, *y, residual));
      }
      if (!instr.hasAttr("activation") || !y)
        return single(std::move(y));
      // The fused epilogue, rounded as the unfused linear + gelu pair.
      TRY(act, instr.stringAttr("activation"));
      if (act != "gelu_tanh")
        return Error{"unknown activation '" + act + "'"};
      return single(ref::unary(ref::UnaryKind::Gelu, *y));
    }
    if (op == "trellis.broadcast_rows") {
      TRY(row, in.tensor(0));
      Shape shape = instr.types.at(0).shape;
      if (in.size() > 1) {
        // A dynamic result: its leading dimensions are those of `like`.
        TRY(like, in.tensor(1));
        size_t lead = shape.size() - size_t(row.rank()) + 1;
        if (size_t(like.rank()) < lead)
          return Error{"'like' has rank " + std::to_string(like.rank()) +
                       ", fewer than the " + std::to_string(lead) +
                       " leading dimensions of the result"};
        std::copy_n(like.shape().begin(), lead, shape.begin());
      }
      return single(ref::broadcastRows(row, shape));
    }
    if (op == "trellis.layer_norm_modulate") {
      TRY(x, in.tensor(0));
      TRY(shift, in.tensor(1));
      TRY(scale, in.tensor(2));
      TRY(eps, instr.floatAttr("eps"));
      return single(ref::layerNormModulate(x, shift, scale, float(eps)));
    }
    if (op == "trellis.matmul") {
      TRY(a, in.tensor(0));
      TRY(b, in.tensor(1));
      return single(ref::matmul(a, b));
    }
    static const std::map<std::string, ref::BinaryKind> binaries = {
        {"trellis.add", ref::BinaryKind::Add},
        {"trellis.sub", ref::BinaryKind::Sub},
        {"trellis.mul", ref::BinaryKind::Mul},
        {"trellis.div", ref::BinaryKind::Div},
        {"trellis.maximum", ref::BinaryKind::Maximum}};
    if (auto it = binaries.find(op); it != binaries.end()) {
      TRY(a, in.tensor(0));
      TRY(b, in.tensor(1));
      return single(ref::binary(it->second, a, b));
    }
    static const std::map<std::string, ref::UnaryKind> unaries = {
        {"trellis.silu", ref::UnaryKind::Silu},
        {"trellis.gelu", ref::UnaryKind::Gelu},
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
    if (auto it = unaries.find(op); it != unaries.end()) {
      TRY(x, in.tensor(0));
      return single(ref::unary(it->second, x));
    }
    if (op == "trellis.modulate") {
      TRY(x, in.tensor(0));
      TRY(shift, in.tensor(1));
      TRY(scale, in.tensor(2));
      return single(ref::modulate(x, shift, scale));
    }
    if (op == "trellis.gated_residual") {
      TRY(x, in.tensor(0));
      TRY(h, in.tensor(1));
      TRY(gate, in.tensor(2));
      return single(ref::gatedResidual(x, h, gate));
    }
    if (op == "trellis.gated_residual_norm") {
      // The unfused ops in turn: the norm reads the rounded residual.
      // Operands: x, h, gate, then the optional plus, shift + scale, weight +
      // bias (told apart by the operand segment sizes).
      TRY(x, in.tensor(0));
      TRY(h, in.tensor(1));
      TRY(gate, in.tensor(2));
      TRY(eps, instr.floatAttr("eps"));
      TRY(sizes, instr.intArrayAttr("operandSegmentSizes"));
      if (sizes.size() != 8)
        return Error{"gated_residual_norm: operandSegmentSizes must have 8 "
                     "entries"};
      TRY(residual, ref::gatedResidual(x, h, gate));
      return residualNorm(in, sizes, 3, 3, residual, float(eps),
                          instr.types.at(1).dtype, out);
    }
    if (op == "trellis.linear_residual_norm") {
      // The unfused ops in turn, each rounded to x's dtype: linear, gated
      // residual (or add), plus, then the norm of the rounded residual.
      // Operands: input, weight, bias, x, then the optional gate, plus,
      // shift + scale, norm weight + bias (told apart by the operand segment
      // sizes).
      TRY(a, in.tensor(0));
      TRY(w, in.tensor(1));
      TRY(bias, in.tensor(2));
      TRY(x, in.tensor(3));
      TRY(eps, instr.floatAttr("eps"));
      TRY(sizes, instr.intArrayAttr("operandSegmentSizes"));
      if (sizes.size() != 10)
        return Error{"linear_residual_norm: operandSegmentSizes must have 10 "
                     "entries"};
      TRY(h, ref::linear(a, w, &bias));
      size_t next = 4;
      HostTensor residual;
      if (sizes[4]) {
        TRY(gate, in.tensor(next++));
        TRY(gated, ref::gatedResidual(x, h, gate));
        residual = gated;
      } else {
        // As trellis.linear … residual x: the rounded product plus x.
        TRY(sum, ref::binary(ref::BinaryKind::Add, h, x));
        residual = sum;
      }
      return residualNorm(in, sizes, 5, next, residual, float(eps),
                          instr.types.at(1).dtype, out);
    }
    if (op == "trellis.layer_norm") {
      TRY(x, in.tensor(0));
      auto w = optTensor(1), b = optTensor(2);
      TRY(eps, instr.floatAttr("eps"));
      return single(ref::layerNorm(x, int(intOr(instr, "axis", -1)),
                                   float(eps), w ? &*w : nullptr,
                                   b ? &*b : nullptr));
    }
    if (op == "trellis.head_rms_norm") {
      TRY(x, in.tensor(0));
      TRY(g, in.tensor(1));
      return single(ref::headRmsNorm(x, g));
    }
    if (op == "trellis.softmax") {
      TRY(x, in.tensor(0));
      return single(ref::softmax(x, int(intOr(instr, "axis", -1))));
    }
    if (op == "trellis.attention") {
      TRY(q, in.tensor(0));
      TRY(k, in.tensor(1));
      TRY(v, in.tensor(2));
      TRY(scale, instr.floatAttr("scale"));
      // Optional q_gamma / k_gamma (operandSegmentSizes q, k, v, qg, kg):
      // the head RMS norm, rounded as trellis.head_rms_norm does.
      size_t next = 3;
      if (instr.hasAttr("operandSegmentSizes")) {
        TRY(segments, instr.intArrayAttr("operandSegmentSizes"));
        for (auto [i, t] : {std::pair<size_t, HostTensor *>{3, &q},
                            std::pair<size_t, HostTensor *>{4, &k}}) {
          if (segments.size() != 5 || segments[i] == 0)
            continue;
          TRY(gamma, in.tensor(next++));
          TRY(normed, ref::headRmsNorm(*t, gamma));
          *t = normed;
        }
      }
      return single(ref::attention(q, k, v, float(scale)));
    }
    if (op == "trellis.timestep_embedding") {
      TRY(t, in.tensor(0));
      return single(ref::timestepEmbedding(t, intOr(instr, "dim", 256),
                                           floatOr(instr, "max_period", 1e4)));
    }
    if (op == "trellis.time_grid") {
      // A run-time override of the sampler's steps applies to the grid of
      // its time tables too (the same entry function).
      TRY(steps, instr.intAttr("steps"));
      TRY(rescale, instr.floatAttr("rescale_t"));
      int64_t run = steps;
      if (auto it = overrides_.find(entry_); it != overrides_.end())
        run = it->second.steps.value_or(run);
      // The tables' capacity: the result's rows (>= the compiled steps).
      return single(
          ref::timeGridTable(instr.types.at(0).shape.at(0), run, rescale));
    }
    if (op == "trellis.time_row") {
      TRY(table, in.tensor(0));
      TRY(grid, in.tensor(1));
      TRY(tau, in.tensor(2));
      return single(ref::timeRow(table, grid, tau));
    }
    if (op == "trellis.ape") {
      TRY(pos, in.tensor(0));
      TRY(channels, instr.intAttr("channels"));
      return single(ref::ape(pos, channels));
    }
    if (op == "trellis.conv3d") {
      TRY(x, in.tensor(0));
      TRY(w, in.tensor(1));
      auto b = optTensor(2);
      return single(
          ref::conv3d(x, w, b ? &*b : nullptr, intOr(instr, "padding", 1)));
    }
    if (op == "trellis.pixel_shuffle_3d") {
      TRY(x, in.tensor(0));
      return single(ref::pixelShuffle3d(x, intOr(instr, "factor", 2)));
    }
    if (op == "trellis.reshape") {
      TRY(x, in.tensor(0));
      return single(ref::reshape(x, instr.types.at(0).shape));
    }
    if (op == "trellis.permute") {
      TRY(x, in.tensor(0));
      TRY(perm, instr.intArrayAttr("perm"));
      return single(ref::permute(x, std::vector<int>(perm.begin(), perm.end())));
    }
    if (op == "trellis.concat") {
      std::vector<HostTensor> parts;
      for (size_t i = 0; i < in.size(); ++i) {
        TRY(p, in.tensor(i));
        parts.push_back(p);
      }
      TRY(axis, instr.intAttr("axis"));
      return single(ref::concat(parts, int(axis)));
    }
    if (op == "trellis.split") {
      TRY(x, in.tensor(0));
      TRY(axis, instr.intAttr("axis"));
      TRY(sizes, instr.intArrayAttr("sizes"));
      TRY(parts, ref::split(x, int(axis), sizes));
      for (HostTensor &p : parts)
        out.push_back(std::move(p));
      return Status::ok();
    }
    if (op == "trellis.cfg_combine") {
      TRY(vc, in.tensor(0));
      TRY(vu, in.tensor(1));
      TRY(w, instr.floatAttr("strength"));
      return single(ref::cfgCombine(vc, vu, w));
    }
    if (op == "trellis.euler_update") {
      TRY(x, in.tensor(0));
      TRY(v, in.tensor(1));
      TRY(dt, instr.floatAttr("dt"));
      return single(ref::eulerUpdate(x, v, dt));
    }
    // Coordinate sets.
    auto coordsOut = [&](Result<ref::CoordSet> c) -> Status {
      if (!c)
        return Error{c.message()};
      out.push_back(std::make_shared<const ref::CoordSet>(std::move(c).value()));
      return Status::ok();
    };
    if (op == "trellis.occupancy") {
      TRY(logits, in.tensor(0));
      TRY(rows, ref::occupancy(logits));
      return coordsOut(ref::CoordSet::create(rows, logits.dim(2),
                                             logits.dim(0)));
    }
    if (op == "trellis.sparse.from_tensor") {
      TRY(t, in.tensor(0));
      TRY(res, instr.intAttr("resolution"));
      return coordsOut(ref::CoordSet::create(t, res));
    }
    if (op == "trellis.sparse.to_tensor") {
      TRY(c, in.coords(0));
      out.push_back(c->coords);
      return Status::ok();
    }
    if (op == "trellis.sparse.xyz") {
      TRY(c, in.coords(0));
      out.push_back(ref::xyz(*c));
      return Status::ok();
    }
    if (op == "trellis.sparse.coarsen") {
      TRY(c, in.coords(0));
      return coordsOut(ref::coarsen(*c, intOr(instr, "factor", 2)));
    }
    if (op == "trellis.sparse.subdivide") {
      TRY(c, in.coords(0));
      return coordsOut(ref::subdivideCoords(*c));
    }
    if (op == "trellis.sparse.neighbor_map") {
      TRY(c, in.coords(0));
      return single(ref::neighborMap(*c, intOr(instr, "kernel", 3)));
    }
    auto segmentsOut = [&](Result<ref::Segments> s) -> Status {
      if (!s)
        return Error{s.message()};
      out.push_back(std::make_shared<const ref::Segments>(std::move(s).value()));
      return Status::ok();
    };
    if (op == "trellis.sparse.batch_segments") {
      TRY(c, in.coords(0));
      return segmentsOut(ref::batchSegments(*c));
    }
    if (op == "trellis.sparse.window_segments") {
      TRY(c, in.coords(0));
      return segmentsOut(ref::windowSegments(*c, intOr(instr, "window", 8),
                                             intOr(instr, "shift", 0)));
    }
    if (op == "trellis.sparse.conv3d") {
      TRY(feats, in.tensor(0));
      TRY(w, in.tensor(1));
      // Optional operands: bias (tensor) and neighbour map (the last one,
      // present for k > 1). The types tell them apart: a neighbour map is
      // [N, k³] i32.
      std::optional<HostTensor> bias, nbmap;
      for (size_t i = 2; i < in.size(); ++i) {
        TRY(t, in.tensor(i));
        if (t.dtype() == DType::I32)
          nbmap = t;
        else
          bias = t;
      }
      if (w.rank() == 5 && w.dim(1) == 1 && w.dim(2) == 1 && w.dim(3) == 1)
        return single(ref::sparseConv1x1(feats, w, bias ? &*bias : nullptr));
      if (!nbmap)
        return Error{"a 3x3x3 sparse conv needs a neighbour map"};
      return single(
          ref::sparseConv3d(feats, *nbmap, w, bias ? &*bias : nullptr));
    }
    if (op == "trellis.sparse.parent_neighbor_map") {
      TRY(nb, in.tensor(0));
      TRY(coarse, in.coords(1));
      TRY(fine, in.coords(2));
      return single(ref::parentNeighborMap(nb, *coarse, *fine));
    }
    if (op == "trellis.sparse.downsample") {
      TRY(f, in.tensor(0));
      TRY(fine, in.coords(1));
      TRY(coarse, in.coords(2));
      return single(ref::sparseDownsample(f, *fine, *coarse));
    }
    if (op == "trellis.sparse.upsample") {
      TRY(f, in.tensor(0));
      TRY(coarse, in.coords(1));
      TRY(fine, in.coords(2));
      return single(ref::sparseUpsample(f, *coarse, *fine));
    }
    if (op == "trellis.sparse.parent_rows") {
      TRY(fine, in.coords(0));
      TRY(coarse, in.coords(1));
      return single(ref::parentRows(*fine, *coarse));
    }
    if (op == "trellis.sparse.child_rows") {
      TRY(fine, in.coords(0));
      TRY(coarse, in.coords(1));
      TRY(csr, ref::childRows(*fine, *coarse));
      out.push_back(csr.first);
      out.push_back(csr.second);
      return Status::ok();
    }
    if (op == "trellis.sparse.batch_index") {
      TRY(c, in.coords(0));
      out.push_back(ref::batchIndex(*c));
      return Status::ok();
    }
    if (op == "trellis.gather_rows") {
      TRY(x, in.tensor(0));
      TRY(index, in.tensor(1));
      return single(ref::gatherRows(x, index));
    }
    if (op == "trellis.segment_mean") {
      TRY(x, in.tensor(0));
      TRY(offsets, in.tensor(1));
      TRY(rows, in.tensor(2));
      return single(
          ref::segmentMean(x, offsets, rows, intOr(instr, "extra_count", 0)));
    }
    if (op == "trellis.sparse.subdivide_features") {
      TRY(f, in.tensor(0));
      return single(ref::subdivideFeats(f));
    }
    if (op == "trellis.sparse.group_norm") {
      TRY(f, in.tensor(0));
      TRY(c, in.coords(1));
      TRY(w, in.tensor(2));
      TRY(b, in.tensor(3));
      TRY(eps, instr.floatAttr("eps"));
      return single(ref::sparseGroupNorm(f, *c, intOr(instr, "groups", 32),
                                         float(eps), &w, &b));
    }
    if (op == "trellis.sparse.batch_broadcast") {
      TRY(v, in.tensor(0));
      TRY(c, in.coords(1));
      return single(ref::batchBroadcast(v, *c));
    }
    if (op == "trellis.sparse.attention") {
      TRY(q, in.tensor(0));
      TRY(k, in.tensor(1));
      TRY(v, in.tensor(2));
      TRY(s, in.segments(3));
      TRY(scale, instr.floatAttr("scale"));
      // Optional q_gamma / k_gamma (operandSegmentSizes q, k, v, segments,
      // qg, kg): the head RMS norm, rounded as trellis.head_rms_norm does.
      size_t next = 4;
      if (instr.hasAttr("operandSegmentSizes")) {
        TRY(segments, instr.intArrayAttr("operandSegmentSizes"));
        for (auto [i, t] : {std::pair<size_t, HostTensor *>{4, &q},
                            std::pair<size_t, HostTensor *>{5, &k}}) {
          if (segments.size() != 6 || segments[i] == 0)
            continue;
          TRY(gamma, in.tensor(next++));
          TRY(normed, ref::headRmsNorm(*t, gamma));
          *t = normed;
        }
      }
      return single(ref::sparseAttention(q, k, v, *s, float(scale)));
    }
    if (op == "trellis.sparse.cross_attention") {
      TRY(q, in.tensor(0));
      TRY(k, in.tensor(1));
      TRY(v, in.tensor(2));
      TRY(c, in.coords(3));
      TRY(scale, instr.floatAttr("scale"));
      return single(ref::sparseCrossAttention(q, k, v, *c, float(scale)));
    }
    if (op == "trellis.sparse.unique_mean") {
      TRY(keys, in.tensor(0));
      TRY(values, in.tensor(1));
      TRY(r, ref::uniqueMean(keys, values));
      out.push_back(r.keys);
      out.push_back(r.means);
      return Status::ok();
    }
    return Error{"no CPU reference kernel for this op"};
  }();
  if (!result)
    return opError(instr, result.message());
  if (out.size() != instr.out.size())
    return opError(instr, "produced " + std::to_string(out.size()) +
                              " results, expected " +
                              std::to_string(instr.out.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (checkFinite_)
      if (auto *t = std::get_if<HostTensor>(&out[i]); t && !allFinite(*t))
        return opError(instr, "result " + std::to_string(i) +
                                  " has a non-finite value (--check-finite)");
    frame.slots[instr.out[i]] = std::move(out[i]);
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// The sampler (spec §3.2, §3.3, §2.3)
//===----------------------------------------------------------------------===//

Status CpuExecutor::runFlowSample(Frame &frame, const Instr &instr) {
  Operands in{instr, frame.slots};
  auto fail = [&](const std::string &m) -> Status { return opError(instr, m); };
  auto noise = in.tensor(0), cond = in.tensor(1), neg = in.tensor(2);
  if (!noise || !cond || !neg)
    return fail("operands must be tensors");
  auto stepsAttr = instr.intAttr("steps");
  auto rescale = instr.floatAttr("rescale_t");
  auto cfg = instr.floatAttr("cfg_strength");
  auto interval = instr.floatArrayAttr("cfg_interval");
  if (!stepsAttr || !rescale || !cfg || !interval || interval->size() != 2)
    return fail("malformed sampler attributes");
  int64_t steps = *stepsAttr;
  double w = *cfg;
  if (auto it = overrides_.find(entry_); it != overrides_.end()) {
    steps = it->second.steps.value_or(steps);
    w = it->second.cfgStrength.value_or(w);
  }
  if (steps < 1)
    return fail("steps must be >= 1, found " + std::to_string(steps));
  std::string mode = "none";
  if (auto m = instr.stringAttr("multi_image")) {
    for (const char *known : {"multidiffusion", "stochastic"})
      if (m->find(known) != std::string::npos)
        mode = known;
  }
  // One region (x, τ, c), or the two-region form of
  // trellis-specialize-guidance: (x, τ) -> v_c and (x, τ) -> v_u with the
  // conditions used from above (already in their slots); with a third
  // region (trellis-share-guidance-prefix) (x, τ) -> the shared values, which
  // the other two take after (x, τ).
  bool specialized = instr.regions.size() >= 2;
  const Region *shared =
      instr.regions.size() == 3 ? &instr.regions[2] : nullptr;
  size_t numShared = shared ? shared->yield.size() : 0;
  if (instr.regions.empty() || instr.regions.size() > 3 ||
      (specialized && mode != "none"))
    return fail("malformed sampler body");
  for (size_t r = 0; r < instr.regions.size(); ++r) {
    size_t numArgs = !specialized ? 3 : r == 2 ? 2 : 2 + numShared;
    if (instr.regions[r].argTypes.size() != numArgs ||
        instr.regions[r].argTypes[1].shape.size() != 1)
      return fail("malformed sampler body");
  }
  const Region &body = instr.regions[0];
  // The model batch B: the body's τ argument is tensor<B×f32>.
  int64_t batch = body.argTypes[1].shape[0];
  int64_t images = cond->dim(0);

  // The shared values of the step being evaluated (empty: not yet computed
  // for this step's x).
  std::vector<RtValue> sharedValues;
  auto evalRegion = [&](const Region &region, const HostTensor &x, float tau,
                        const HostTensor *c) -> Result<HostTensor> {
    HostTensor tauT(DType::F32, {batch});
    for (int64_t i = 0; i < batch; ++i)
      tauT.mutableData<float>()[i] = tau;
    if (shared && sharedValues.empty()) {
      frame.slots[shared->args.at(0)] = x;
      frame.slots[shared->args.at(1)] = tauT;
      if (Status s = runBody(frame, shared->body); !s)
        return Error{s.message()};
      for (int y : shared->yield)
        sharedValues.push_back(frame.slots[y]);
    }
    frame.slots[region.args.at(0)] = x;
    frame.slots[region.args.at(1)] = tauT;
    if (c)
      frame.slots[region.args.at(2)] = *c;
    for (size_t i = 0; i < numShared; ++i)
      frame.slots[region.args.at(2 + i)] = sharedValues[i];
    if (Status s = runBody(frame, region.body); !s)
      return Error{s.message()};
    if (auto *v = std::get_if<HostTensor>(&frame.slots[region.yield.at(0)]))
      return *v;
    return Error{"the velocity model yielded no tensor"};
  };
  // v(x, τ, c) for c = cond_i or neg_cond (`conditional` says which).
  auto evalBody = [&](const HostTensor &x, float tau, const HostTensor &c,
                      bool conditional) -> Result<HostTensor> {
    if (!specialized)
      return evalRegion(body, x, tau, &c);
    return evalRegion(instr.regions[conditional ? 0 : 1], x, tau, nullptr);
  };

  std::vector<double> grid = ref::timeGrid(int(steps), *rescale);
  HostTensor x = noise->dtype() == DType::F32 ? noise->clone()
                                              : noise->toFloat32();
  auto negB = repeatBatch(*neg, batch);
  if (!negB)
    return fail(negB.message());
  for (int64_t i = 0; i < steps; ++i) {
    double t = grid[size_t(i)], tPrev = grid[size_t(i + 1)];
    float tau = ref::modelTime(t);
    sharedValues.clear(); // a new x: the shared region runs again
    HostTensor vc;
    if (mode == "multidiffusion") {
      // v_c = mean over the images of v(x, t, cond_j).
      HostTensor sum;
      for (int64_t j = 0; j < images; ++j) {
        auto cj = row(*cond, j);
        if (!cj)
          return fail(cj.message());
        auto cb = repeatBatch(*cj, batch);
        if (!cb)
          return fail(cb.message());
        auto v = evalBody(x, tau, *cb, true);
        if (!v)
          return Error{v.message()};
        if (j == 0) {
          sum = *v;
        } else {
          auto s = ref::add(sum, *v);
          if (!s)
            return fail(s.message());
          sum = *s;
        }
      }
      HostTensor inv(DType::F32, {1});
      inv.mutableData<float>()[0] = 1.0f / float(images);
      auto mean = ref::mul(sum, inv);
      if (!mean)
        return fail(mean.message());
      vc = *mean;
    } else {
      HostTensor c = *cond;
      if (mode == "stochastic") {
        auto cj = row(*cond, i % images);
        if (!cj)
          return fail(cj.message());
        c = *cj;
      }
      auto cb = repeatBatch(c, batch);
      if (!cb)
        return fail(cb.message());
      auto v = evalBody(x, tau, *cb, true);
      if (!v)
        return Error{v.message()};
      vc = *v;
    }
    HostTensor v = vc;
    if (ref::isGuidedStep(t, (*interval)[0], (*interval)[1])) {
      auto vu = evalBody(x, tau, *negB, false);
      if (!vu)
        return Error{vu.message()};
      auto combined = ref::cfgCombine(vc, *vu, w);
      if (!combined)
        return fail(combined.message());
      v = *combined;
    }
    auto next = ref::eulerUpdate(x, v, t - tPrev);
    if (!next)
      return fail(next.message());
    x = *next;
    if (checkFinite_ && !allFinite(x))
      return fail("the sample has a non-finite value after step " +
                  std::to_string(i + 1) + " (--check-finite)");
    if (onStep_)
      onStep_(entry_, i + 1, steps);
  }
  frame.slots[instr.out.at(0)] = std::move(x);
  return Status::ok();
}

} // namespace trellis
