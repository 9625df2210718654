//===- CpuExecutor.cpp - Runs a host program on the CPU reference ---------===//
//
// Functions, calls and the sampler loop (trellis.flow_sample); every other op
// runs from the one op table (CpuOps.h) that the *Ops.cpp files fill.
//
//===----------------------------------------------------------------------===//
#include "trellis/Runtime/CpuExecutor.h"

#include "runtime/executor/CpuOps.h"

#include <algorithm>
#include <cmath>

namespace trellis {

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
  TRELLIS_RETURN_IF_ERROR(runBody(frame, fn.body));
  std::vector<RtValue> results;
  for (int slot : fn.results)
    results.push_back(frame.slots[slot]);
  return results;
}

Result<std::vector<RtValue>> CpuExecutor::evalOp(const Program &program,
                                                 const Instr &instr,
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
  TRELLIS_RETURN_IF_ERROR(exec.runOp(frame, instr));
  std::vector<RtValue> results;
  for (int s : instr.out)
    results.push_back(std::move(frame.slots[s]));
  return results;
}

Status CpuExecutor::runBody(Frame &frame, const std::vector<Instr> &body) {
  for (const Instr &instr : body)
    TRELLIS_RETURN_IF_ERROR(runOp(frame, instr));
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

namespace {

using cpu::OpContext;
using cpu::Operands;
using cpu::OpTable;

/// func.call and trellis.weight, the ops that need the executor (through
/// the context's call and weights).
void registerExecutorOps(OpTable &table) {
  cpu::addOp(table, "func.call", [](const OpContext &ctx) -> Status {
    TRELLIS_ASSIGN_OR_RETURN(auto &callee, ctx.instr.stringAttr("callee"));
    const Function *fn = ctx.program.find(callee);
    if (!fn)
      return Error{"calls '" + callee + "', which the program lacks"};
    std::vector<RtValue> args;
    for (int slot : ctx.instr.in)
      args.push_back(ctx.in.slots[slot]);
    TRELLIS_ASSIGN_OR_RETURN(auto &results, ctx.call(*fn, std::move(args)));
    ctx.out = std::move(results);
    return Status::ok();
  });
  cpu::addOp(table, "trellis.weight", [](const OpContext &ctx) -> Status {
    TRELLIS_ASSIGN_OR_RETURN(auto &name, ctx.instr.stringAttr("name"));
    TRELLIS_ASSIGN_OR_RETURN(auto &model, ctx.instr.stringAttr("model"));
    return ctx.single(ctx.weights(model, name));
  });
}

/// The one op table: op name -> the function that runs it.
const OpTable &opTable() {
  static const OpTable table = [] {
    OpTable t;
    registerExecutorOps(t);
    cpu::registerElementwiseOps(t);
    cpu::registerLinearOps(t);
    cpu::registerNormOps(t);
    cpu::registerAttentionOps(t);
    cpu::registerShapeOps(t);
    cpu::registerSparseOps(t);
    cpu::registerSamplerOps(t);
    return t;
  }();
  return table;
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
  cpu::CallFn callFn = [this](const Function &fn, std::vector<RtValue> args) {
    return call(fn, std::move(args));
  };
  OpContext ctx{instr, in, out, program_, weights_, overrides_, entry_, callFn};
  // Each op fills `out` or returns an error (wrapped with the location).
  const OpTable &table = opTable();
  auto it = table.find(instr.op);
  Status result = it != table.end()
                      ? it->second(ctx)
                      : Status(Error{"no CPU reference kernel for this op"});
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
      TRELLIS_RETURN_IF_ERROR(runBody(frame, shared->body));
      for (int y : shared->yield)
        sharedValues.push_back(frame.slots[y]);
    }
    frame.slots[region.args.at(0)] = x;
    frame.slots[region.args.at(1)] = tauT;
    if (c)
      frame.slots[region.args.at(2)] = *c;
    for (size_t i = 0; i < numShared; ++i)
      frame.slots[region.args.at(2 + i)] = sharedValues[i];
    TRELLIS_RETURN_IF_ERROR(runBody(frame, region.body));
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
  HostTensor x =
      noise->dtype() == DType::F32 ? noise->clone() : noise->toFloat32();
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
