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
  OpContext ctx{instr,    in,       out,
                program_, weights_, overrides_,
                entry_,   callFn,   fp8Observer_ ? &fp8Observer_ : nullptr};
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

/// Runs one trellis.flow_sample op: reads its settings, then takes the Euler
/// steps of the flow from the noise, evaluating the velocity model's
/// region(s) in the caller's frame. Failures of the op itself name it; a
/// failure inside the velocity model comes as its op reported it.
class CpuExecutor::FlowSampler {
public:
  FlowSampler(CpuExecutor &executor, Frame &frame, const Instr &instr)
      : ex_(executor), frame_(frame), instr_(instr) {}
  Status run();

private:
  Error fail(const std::string &m) const { return ex_.opError(instr_, m); }
  Status readAttributes();
  Status readRegions();
  Result<HostTensor> evalRegion(const Region &region, const HostTensor &x,
                                float tau, const HostTensor *c);
  Result<HostTensor> evalBody(const HostTensor &x, float tau,
                              const HostTensor &c, bool conditional);
  Result<HostTensor> multiDiffusionVelocity(const HostTensor &x, float tau);
  Result<HostTensor> oneImageVelocity(const HostTensor &x, float tau,
                                      int64_t i);
  Status step(HostTensor &x, int64_t i);

  CpuExecutor &ex_;
  Frame &frame_;
  const Instr &instr_;
  // The attributes, with the run's overrides.
  int64_t steps_ = 0;
  double cfgStrength_ = 0, rescaleT_ = 0;
  std::vector<double> interval_;
  std::string mode_ = "none"; // the multi-image mode
  // The regions: see readRegions.
  bool specialized_ = false;
  const Region *shared_ = nullptr;
  size_t numShared_ = 0;
  int64_t batch_ = 0; // the model batch B
  // The operands: cond [images, ...] and neg_cond repeated to the batch.
  HostTensor cond_, negB_;
  int64_t images_ = 0;
  std::vector<double> grid_; // the time grid, steps + 1 times
  // The shared values of the step being evaluated (empty: not yet computed
  // for this step's x).
  std::vector<RtValue> sharedValues_;
};

Status CpuExecutor::runFlowSample(Frame &frame, const Instr &instr) {
  return FlowSampler(*this, frame, instr).run();
}

/// Steps, rescale_t, cfg_strength and cfg_interval (the run's overrides
/// replace steps and the guidance strength) and the multi-image mode.
Status CpuExecutor::FlowSampler::readAttributes() {
  auto stepsAttr = instr_.intAttr("steps");
  auto rescale = instr_.floatAttr("rescale_t");
  auto cfg = instr_.floatAttr("cfg_strength");
  auto interval = instr_.floatArrayAttr("cfg_interval");
  if (!stepsAttr || !rescale || !cfg || !interval || interval->size() != 2)
    return fail("malformed sampler attributes");
  steps_ = *stepsAttr;
  cfgStrength_ = *cfg;
  if (auto it = ex_.overrides_.find(ex_.entry_); it != ex_.overrides_.end()) {
    steps_ = it->second.steps.value_or(steps_);
    cfgStrength_ = it->second.cfgStrength.value_or(cfgStrength_);
  }
  if (steps_ < 1)
    return fail("steps must be >= 1, found " + std::to_string(steps_));
  rescaleT_ = *rescale;
  interval_ = *interval;
  if (auto m = instr_.stringAttr("multi_image")) {
    for (const char *known : {"multidiffusion", "stochastic"})
      if (m->find(known) != std::string::npos)
        mode_ = known;
  }
  return Status::ok();
}

/// One region (x, τ, c), or the two-region form of
/// trellis-specialize-guidance: (x, τ) -> v_c and (x, τ) -> v_u with the
/// conditions used from above (already in their slots); with a third region
/// (trellis-share-guidance-prefix) (x, τ) -> the shared values, which the
/// other two take after (x, τ).
Status CpuExecutor::FlowSampler::readRegions() {
  const std::vector<Region> &regions = instr_.regions;
  specialized_ = regions.size() >= 2;
  shared_ = regions.size() == 3 ? &regions[2] : nullptr;
  numShared_ = shared_ ? shared_->yield.size() : 0;
  if (regions.empty() || regions.size() > 3 ||
      (specialized_ && mode_ != "none"))
    return fail("malformed sampler body");
  for (size_t r = 0; r < regions.size(); ++r) {
    size_t numArgs = !specialized_ ? 3 : r == 2 ? 2 : 2 + numShared_;
    if (regions[r].argTypes.size() != numArgs ||
        regions[r].argTypes[1].shape.size() != 1)
      return fail("malformed sampler body");
  }
  // The model batch B: the body's τ argument is tensor<B×f32>.
  batch_ = regions[0].argTypes[1].shape[0];
  return Status::ok();
}

/// Runs `region` on (x, τ, c) (c: null for a specialized region), first the
/// shared region when there is one and it has not run for this x; returns
/// the velocity it yields.
Result<HostTensor> CpuExecutor::FlowSampler::evalRegion(const Region &region,
                                                        const HostTensor &x,
                                                        float tau,
                                                        const HostTensor *c) {
  HostTensor tauT(DType::F32, {batch_});
  for (int64_t i = 0; i < batch_; ++i)
    tauT.mutableData<float>()[i] = tau;
  if (shared_ && sharedValues_.empty()) {
    frame_.slots[shared_->args.at(0)] = x;
    frame_.slots[shared_->args.at(1)] = tauT;
    TRELLIS_RETURN_IF_ERROR(ex_.runBody(frame_, shared_->body));
    for (int y : shared_->yield)
      sharedValues_.push_back(frame_.slots[y]);
  }
  frame_.slots[region.args.at(0)] = x;
  frame_.slots[region.args.at(1)] = tauT;
  if (c)
    frame_.slots[region.args.at(2)] = *c;
  for (size_t i = 0; i < numShared_; ++i)
    frame_.slots[region.args.at(2 + i)] = sharedValues_[i];
  TRELLIS_RETURN_IF_ERROR(ex_.runBody(frame_, region.body));
  if (auto *v = std::get_if<HostTensor>(&frame_.slots[region.yield.at(0)]))
    return *v;
  return Error{"the velocity model yielded no tensor"};
}

/// v(x, τ, c) for c = cond_i or neg_cond (`conditional` says which).
Result<HostTensor> CpuExecutor::FlowSampler::evalBody(const HostTensor &x,
                                                      float tau,
                                                      const HostTensor &c,
                                                      bool conditional) {
  if (!specialized_)
    return evalRegion(instr_.regions[0], x, tau, &c);
  return evalRegion(instr_.regions[conditional ? 0 : 1], x, tau, nullptr);
}

/// Multidiffusion: v_c = mean over the images of v(x, τ, cond_j).
Result<HostTensor>
CpuExecutor::FlowSampler::multiDiffusionVelocity(const HostTensor &x,
                                                 float tau) {
  HostTensor sum;
  for (int64_t j = 0; j < images_; ++j) {
    auto cj = row(cond_, j);
    if (!cj)
      return fail(cj.message());
    auto cb = repeatBatch(*cj, batch_);
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
  inv.mutableData<float>()[0] = 1.0f / float(images_);
  auto mean = ref::mul(sum, inv);
  if (!mean)
    return fail(mean.message());
  return mean;
}

/// v_c of step `i` from one condition: all of cond, or with the stochastic
/// mode its image i mod images.
Result<HostTensor>
CpuExecutor::FlowSampler::oneImageVelocity(const HostTensor &x, float tau,
                                           int64_t i) {
  HostTensor c = cond_;
  if (mode_ == "stochastic") {
    auto cj = row(cond_, i % images_);
    if (!cj)
      return fail(cj.message());
    c = *cj;
  }
  auto cb = repeatBatch(c, batch_);
  if (!cb)
    return fail(cb.message());
  return evalBody(x, tau, *cb, true);
}

/// Step `i`: from grid time t_i to t_{i+1}, the conditional velocity, with
/// classifier-free guidance where t_i is inside the interval, then the Euler
/// update of `x`.
Status CpuExecutor::FlowSampler::step(HostTensor &x, int64_t i) {
  double t = grid_[size_t(i)], tPrev = grid_[size_t(i + 1)];
  float tau = ref::modelTime(t);
  sharedValues_.clear(); // a new x: the shared region runs again
  Result<HostTensor> vc = mode_ == "multidiffusion"
                              ? multiDiffusionVelocity(x, tau)
                              : oneImageVelocity(x, tau, i);
  if (!vc)
    return vc.takeError();
  HostTensor v = *vc;
  if (ref::isGuidedStep(t, interval_[0], interval_[1])) {
    auto vu = evalBody(x, tau, negB_, false);
    if (!vu)
      return Error{vu.message()};
    auto combined = ref::cfgCombine(*vc, *vu, cfgStrength_);
    if (!combined)
      return fail(combined.message());
    v = *combined;
  }
  auto next = ref::eulerUpdate(x, v, t - tPrev);
  if (!next)
    return fail(next.message());
  x = *next;
  if (ex_.checkFinite_ && !allFinite(x))
    return fail("the sample has a non-finite value after step " +
                std::to_string(i + 1) + " (--check-finite)");
  if (ex_.onStep_)
    if (Status s = ex_.onStep_(ex_.entry_, i + 1, steps_); !s)
      return fail(s.message());
  return Status::ok();
}

Status CpuExecutor::FlowSampler::run() {
  Operands in{instr_, frame_.slots};
  auto noise = in.tensor(0), cond = in.tensor(1), neg = in.tensor(2);
  if (!noise || !cond || !neg)
    return fail("operands must be tensors");
  TRELLIS_RETURN_IF_ERROR(readAttributes());
  TRELLIS_RETURN_IF_ERROR(readRegions());
  cond_ = std::move(*cond);
  images_ = cond_.dim(0);
  grid_ = ref::timeGrid(int(steps_), rescaleT_);
  HostTensor x =
      noise->dtype() == DType::F32 ? noise->clone() : noise->toFloat32();
  auto negB = repeatBatch(*neg, batch_);
  if (!negB)
    return fail(negB.message());
  negB_ = std::move(*negB);
  for (int64_t i = 0; i < steps_; ++i)
    TRELLIS_RETURN_IF_ERROR(step(x, i));
  frame_.slots[instr_.out.at(0)] = std::move(x);
  return Status::ok();
}

} // namespace trellis
