//===- Sampler.cpp - Runs trellis.flow_sample on the GPU ------------------===//
//
// The sampler loop: per step, the shared prefix, the conditional and the
// unconditional branch (concurrently, on the second stream, where allowed),
// then the generated update kernel; τ goes through pinned host memory and
// the progress callback runs one step behind the launches. Multi-image
// conditioning (image conditioning spec §4): `stochastic` conditions step i
// on image i mod N; `multidiffusion` averages the N images' velocities with
// the generated velocity-sum kernel, in image order.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace trellis {

/// One run of a sampler: its resolved attributes and buffers, what the
/// steps of runSampler() share.
struct GpuExecutor::Impl::SamplerRun {
  Prepared &p;
  Node &node;
  const Instr &instr;
  int64_t n;     // steps
  double w;      // guidance strength
  Launch update; // the update kernel
  int64_t stateRows;
  bool specialized; // two branch bodies (else one, with cond)
  Body *condBody, *uncondBody, *sharedBody;
  size_t stateBytes;
  CUdeviceptr x, vc, vu; // the state, the two velocities
  int64_t batch;
  enum class MultiImage { None, Stochastic, MultiDiffusion } multiImage;
  int64_t images;                    // rows of cond
  std::optional<Launch> velocitySum; // multidiffusion
  float *taus;                       // Prepared::pinnedTau
  CUevent stepEvents[2];             // progress (onStep)
  std::vector<double> grid;          // the time grid
  std::vector<double> interval;      // cfg_interval
};

Status GpuExecutor::Impl::runSampler(Prepared &p, Node &node) {
  const Instr &instr = *node.instr;
  auto fail = [&](const std::string &m) -> Status { return opError(instr, m); };
  auto steps = instr.intAttr("steps");
  auto rescale = instr.floatAttr("rescale_t");
  auto cfg = instr.floatAttr("cfg_strength");
  auto interval = instr.floatArrayAttr("cfg_interval");
  if (!steps || !rescale || !cfg || !interval || interval->size() != 2)
    return fail("malformed sampler attributes");
  auto multiImage = SamplerRun::MultiImage::None;
  if (auto m = instr.stringAttr("multi_image")) {
    // "#trellis.multi_image<stochastic>" (HostProgram.cpp).
    if (m->find("stochastic") != std::string::npos)
      multiImage = SamplerRun::MultiImage::Stochastic;
    else if (m->find("multidiffusion") != std::string::npos)
      multiImage = SamplerRun::MultiImage::MultiDiffusion;
  }
  int64_t n = *steps;
  double w = *cfg;
  if (auto it = overrides.find(p.name); it != overrides.end()) {
    n = it->second.steps.value_or(n);
    w = it->second.cfgStrength.value_or(w);
  }
  if (n < 1)
    return fail("steps must be >= 1, found " + std::to_string(n));
  auto update = instr.attrs.find("trellis.update");
  if (update == instr.attrs.end())
    return fail("the compiler did not annotate the sampler's update kernel");
  auto updateLaunch = resolveLaunch(*update);
  if (!updateLaunch)
    return fail(updateLaunch.message());
  int64_t stateRows = p.slots[node.out[0]].type.shape.at(0);
  bool dynamicUpdate = update->contains("threads_per_row");
  if (dynamicUpdate) {
    int64_t threads = stateRows * update->at("threads_per_row").get<int64_t>();
    updateLaunch->grid[0] =
        unsigned(std::max<int64_t>(1, (threads + updateLaunch->block[0] - 1) /
                                          int64_t(updateLaunch->block[0])));
  }

  // Two region forms: one body (x, τ, cond) evaluated with cond and with
  // neg_cond, or two bodies (x, τ) after trellis-specialize-guidance, with
  // a third that computes what both read, once per step
  // (trellis-share-guidance-prefix).
  bool specialized = node.regions.size() >= 2;
  if (specialized && multiImage != SamplerRun::MultiImage::None)
    return fail("a multi-image sampler needs the one-body form (the "
                "compiler does not specialize its guidance)");
  std::optional<Launch> velocitySum;
  if (multiImage == SamplerRun::MultiImage::MultiDiffusion) {
    auto sum = instr.attrs.find("trellis.velocity_sum");
    if (sum == instr.attrs.end())
      return fail("the compiler did not annotate the multidiffusion "
                  "sampler's velocity-sum kernel");
    auto sumLaunch = resolveLaunch(*sum);
    if (!sumLaunch)
      return fail(sumLaunch.message());
    if (sum->contains("threads_per_row")) {
      int64_t threads = stateRows * sum->at("threads_per_row").get<int64_t>();
      sumLaunch->grid[0] =
          unsigned(std::max<int64_t>(1, (threads + sumLaunch->block[0] - 1) /
                                            int64_t(sumLaunch->block[0])));
    }
    velocitySum = *sumLaunch;
  }
  Body &condBody = node.regions.at(0);
  Body &uncondBody = specialized ? node.regions[1] : node.regions[0];
  Body *sharedBody = node.regions.size() == 3 ? &node.regions[2] : nullptr;
  const SlotInfo &state = p.slots[node.out[0]];
  size_t stateBytes = bytesOf(state.type);
  CUdeviceptr x = address(p, node.out[0]);
  CUdeviceptr vc = address(p, node.loopSlots[0]);
  CUdeviceptr vu = address(p, node.loopSlots[1]);
  const ValueType &noiseType = p.slots[node.in[0]].type;
  if (noiseType.dtype != DType::F32)
    return fail("the GPU sampler expects f32 noise");
  if (Status s = check(
          api->cuMemcpyDtoDAsync(x, address(p, node.in[0]), stateBytes, stream),
          "cuMemcpyDtoDAsync");
      !s)
    return fail(s.message());
  int64_t batch =
      condBody.args.size() > 1 ? p.slots[condBody.args[1]].type.shape.at(0) : 1;
  // τ for every (step, branch), in pinned memory that outlives the copies
  // (Prepared::pinnedTau; a run's copies finish before the run returns).
  if (size_t bytes = size_t(n) * 3 * batch * 4; bytes > p.pinnedTauBytes) {
    if (p.pinnedTau) {
      api->cuStreamSynchronize(stream);
      api->cuMemFreeHost(p.pinnedTau);
      p.pinnedTau = nullptr;
      p.pinnedTauBytes = 0;
    }
    if (Status s =
            check(api->cuMemAllocHost(&p.pinnedTau, bytes), "cuMemAllocHost");
        !s)
      return fail(s.message());
    p.pinnedTauBytes = bytes;
  }
  float *taus = static_cast<float *>(p.pinnedTau);

  CUevent stepEvents[2] = {nullptr, nullptr};
  if (onStep) {
    stepEvents[0] = nextEvent();
    stepEvents[1] = nextEvent();
  }
  SamplerRun r{p,
               node,
               instr,
               n,
               w,
               *updateLaunch,
               stateRows,
               specialized,
               &condBody,
               &uncondBody,
               sharedBody,
               stateBytes,
               x,
               vc,
               vu,
               batch,
               multiImage,
               p.slots[node.in[1]].type.shape.at(0),
               velocitySum,
               taus,
               {stepEvents[0], stepEvents[1]},
               ref::timeGrid(int(n), *rescale),
               *interval};
  auto reportStep = [&](int64_t step) { return reportSamplerStep(r, step); };
  for (int64_t i = 0; i < n; ++i)
    TRELLIS_RETURN_IF_ERROR(runSamplerStep(r, i));
  if (onStep && n > 0)
    return reportStep(n - 1);
  return Status::ok();
}

/// τ into a region's argument (slot 0: cond, 1: uncond, 2: shared).
Status GpuExecutor::Impl::setSamplerTau(SamplerRun &r, Body &body, float tau,
                                        int slotIndex, int64_t step) {
  Prepared &p = r.p;
  const Instr &instr = r.instr;
  auto fail = [&](const std::string &m) -> Status { return opError(instr, m); };
  const int64_t batch = r.batch;
  float *taus = r.taus;
  float *t = taus + (step * 3 + slotIndex) * batch;
  for (int64_t i = 0; i < batch; ++i)
    t[i] = tau;
  CUdeviceptr tauPtr = address(p, body.args[1]);
  p.stepTau[body.args[1]] = tau; // for the body's trellis.time_row
  if (Status s = check(api->cuMemcpyHtoDAsync(tauPtr, t, batch * 4, stream),
                       "cuMemcpyHtoDAsync (tau)");
      !s)
    return fail(s.message());
  return Status::ok();
}

/// One branch body at τ: its condition argument (the one-body form), the
/// body, and its velocity copied `into` v_cond or v_uncond.
Status GpuExecutor::Impl::evaluateSamplerBranch(SamplerRun &r, Body &body,
                                                float tau, int slotIndex,
                                                int cond, CUdeviceptr into,
                                                int64_t step, int64_t condRow) {
  Prepared &p = r.p;
  Node &node = r.node;
  const Instr &instr = r.instr;
  auto fail = [&](const std::string &m) -> Status { return opError(instr, m); };
  const bool specialized = r.specialized;
  const size_t stateBytes = r.stateBytes;
  auto setTau = [&](Body &body, float tau, int slotIndex,
                    int64_t step) -> Status {
    return setSamplerTau(r, body, tau, slotIndex, step);
  };
  TRELLIS_RETURN_IF_ERROR(setTau(body, tau, slotIndex, step));
  if (!specialized) {
    // The body's condition argument: copy cond or neg_cond (batch rows).
    const SlotInfo &arg = p.slots[body.args[2]];
    size_t argBytes = bytesOf(arg.type);
    CUdeviceptr src = address(p, node.in[cond]);
    size_t srcBytes = bytesOf(p.slots[node.in[cond]].type);
    if (condRow >= 0) { // one image of a multi-image cond
      srcBytes /= size_t(r.images);
      src += size_t(condRow) * srcBytes;
    }
    if (argBytes % srcBytes != 0)
      return fail("the condition does not tile the model batch");
    for (size_t off = 0; off < argBytes; off += srcBytes)
      if (Status s =
              check(api->cuMemcpyDtoDAsync(address(p, body.args[2]) + off, src,
                                           srcBytes, stream),
                    "cuMemcpyDtoDAsync (condition)");
          !s)
        return fail(s.message());
  }
  TRELLIS_RETURN_IF_ERROR(runBody(p, body));
  if (!into)
    return Status::ok();
  return check(api->cuMemcpyDtoDAsync(into, address(p, body.yields.at(0)),
                                      stateBytes, stream),
               "cuMemcpyDtoDAsync (velocity)");
}

/// v_cond of step `i` into r.vc: from all of cond, from image i mod N
/// (stochastic), or the mean over the images (multidiffusion: summed in
/// order, then scaled by 1/N, as the CPU reference does).
Status GpuExecutor::Impl::conditionalVelocity(SamplerRun &r, float tau,
                                              int64_t i) {
  using Mode = SamplerRun::MultiImage;
  Body &body = *r.condBody;
  if (r.multiImage == Mode::None)
    return evaluateSamplerBranch(r, body, tau, 0, 1, r.vc, i);
  if (r.multiImage == Mode::Stochastic)
    return evaluateSamplerBranch(r, body, tau, 0, 1, r.vc, i, i % r.images);
  TRELLIS_RETURN_IF_ERROR(
      evaluateSamplerBranch(r, body, tau, 0, 1, r.vc, i, 0));
  for (int64_t j = 1; j < r.images; ++j) {
    TRELLIS_RETURN_IF_ERROR(
        evaluateSamplerBranch(r, body, tau, 0, 1, /*into=*/0, i, j));
    CUdeviceptr args[3] = {r.vc, address(r.p, body.yields.at(0)), r.vc};
    float scale = j + 1 == r.images ? 1.0f / float(r.images) : 1.0f;
    void *params[5] = {&args[0], &args[1], &args[2], &scale, &r.stateRows};
    TRELLIS_RETURN_IF_ERROR(launch(*r.velocitySum, params, r.instr,
                                   "the multidiffusion velocity sum"));
    ++report.commands;
  }
  return Status::ok();
}

/// The progress callback for `step`, once the GPU has finished it.
Status GpuExecutor::Impl::reportSamplerStep(SamplerRun &r, int64_t step) {
  Prepared &p = r.p;
  const Instr &instr = r.instr;
  auto fail = [&](const std::string &m) -> Status { return opError(instr, m); };
  CUevent *stepEvents = r.stepEvents;
  const int64_t n = r.n;
  if (Status s = check(api->cuEventSynchronize(stepEvents[size_t(step % 2)]),
                       "the GPU stream");
      !s)
    return fail(s.message());
  if (Status s = onStep(p.name, step + 1, n); !s)
    return fail(s.message());
  return Status::ok();
}

/// Step i of the sampler: the shared prefix, the branches (concurrently
/// where allowed), the update of x, and the progress of the step before.
Status GpuExecutor::Impl::runSamplerStep(SamplerRun &r, int64_t i) {
  Prepared &p = r.p;
  Node &node = r.node;
  const Instr &instr = r.instr;
  auto fail = [&](const std::string &m) -> Status { return opError(instr, m); };
  const std::vector<double> &grid_ = r.grid;
  const std::vector<double> *interval = &r.interval;
  const Launch *updateLaunch = &r.update;
  const bool specialized = r.specialized;
  Body &condBody = *r.condBody, &uncondBody = *r.uncondBody;
  Body *sharedBody = r.sharedBody;
  CUdeviceptr x = r.x, vc = r.vc, vu = r.vu;
  int64_t stateRows = r.stateRows;
  const double w = r.w;
  CUevent *stepEvents = r.stepEvents;
  auto setTau = [&](Body &body, float tau, int slotIndex,
                    int64_t step) -> Status {
    return setSamplerTau(r, body, tau, slotIndex, step);
  };
  auto evaluate = [&](Body &body, float tau, int slotIndex, int cond,
                      CUdeviceptr into, int64_t step) -> Status {
    return evaluateSamplerBranch(r, body, tau, slotIndex, cond, into, step);
  };
  auto reportStep = [&](int64_t step) { return reportSamplerStep(r, step); };
  double t = grid_[size_t(i)], tPrev = grid_[size_t(i + 1)];
  float tau = ref::modelTime(t);
  bool guided = ref::isGuidedStep(t, (*interval)[0], (*interval)[1]);
  if (sharedBody) { // before either branch, on the main stream
    TRELLIS_RETURN_IF_ERROR(setTau(*sharedBody, tau, 2, i));
    TRELLIS_RETURN_IF_ERROR(runBody(p, *sharedBody));
  }
  if (guided && specialized && concurrentBranches()) {
    // The unconditional branch on the second stream, concurrently with
    // the conditional one (its storage is lane 1 of the plan).
    api->cuEventRecord(fork, stream);
    api->cuStreamWaitEvent(stream2, fork, 0);
    std::swap(stream, stream2);
    std::swap(gemmWorkspace, gemmWorkspace2);
    Status s = evaluate(uncondBody, tau, 1, 2, vu, i);
    api->cuEventRecord(join, stream);
    std::swap(stream, stream2);
    std::swap(gemmWorkspace, gemmWorkspace2);
    if (!s)
      return s;
    TRELLIS_RETURN_IF_ERROR(evaluate(condBody, tau, 0, 1, vc, i));
    api->cuStreamWaitEvent(stream, join, 0);
  } else {
    TRELLIS_RETURN_IF_ERROR(conditionalVelocity(r, tau, i));
    if (guided)
      TRELLIS_RETURN_IF_ERROR(evaluate(uncondBody, tau, 1, 2, vu, i));
  }
  CUdeviceptr args4[4] = {x, vc, vu, x};
  float strength = float(w), dt = float(t - tPrev);
  int32_t guidedFlag = guided ? 1 : 0;
  void *params[8] = {&args4[0], &args4[1], &args4[2],   &args4[3],
                     &strength, &dt,       &guidedFlag, &stateRows};
  TRELLIS_RETURN_IF_ERROR(
      launch(*updateLaunch, params, instr, "the sampler update"));
  ++report.commands;
  if (options.checkFinite) {
    auto xs = download(p, node.out[0]);
    if (!xs)
      return fail(xs.message());
    HostTensor f32 = xs->toFloat32();
    for (int64_t j = 0; j < f32.numel(); ++j)
      if (!std::isfinite(f32.data<float>()[j]))
        return fail("the sample has a non-finite value after step " +
                    std::to_string(i + 1) + " (--check-finite)");
  }
  if (onStep) {
    // Progress: report a step once it has finished on the GPU, one step
    // behind the launches, so that the next step is always queued and the
    // GPU does not idle while the host reports.
    CUevent done = stepEvents[size_t(i % 2)];
    api->cuEventRecord(done, stream);
    if (i > 0) {
      TRELLIS_RETURN_IF_ERROR(reportStep(i - 1));
    }
  }
  return Status::ok();
}

} // namespace trellis
