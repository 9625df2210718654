//===- GpuExecutor.cpp - Runs a host program's CUDA functions -------------===//
//
// The public face of the CUDA executor (include/trellis/Runtime/GpuExecutor.h;
// docs/design/gpu-backend.md for the contract with the compiler): create,
// supports, the setters, run, and preparing and releasing an entry function.
// The parts of the executor are in the other files of runtime/cuda.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include "trellis/Runtime/CpuExecutor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <string>
#include <vector>

namespace trellis {

/// Whether `p` was bound to the same voxel set as `args` would be: the same
/// bytes in every coordinate argument, the same shape in every feature one.
static bool sameBinding(const GpuExecutor::Impl::Prepared &p,
                        const std::vector<RtValue> &args) {
  if (p.bindingKey.size() != args.size())
    return false;
  for (size_t i = 0; i < args.size(); ++i) {
    const HostTensor *a = std::get_if<HostTensor>(&args[i]);
    const std::optional<HostTensor> &b = p.bindingKey[i];
    if (!a)
      return false;
    if (b) { // a coordinate argument: the same bytes
      if (a->dtype() != b->dtype() || a->shape() != b->shape() ||
          std::memcmp(a->raw(), b->raw(), b->nbytes()) != 0)
        return false;
    } else if (a->shape() != p.slots[p.args[i]].type.shape) {
      return false; // a feature argument: the same shape
    }
  }
  return true;
}

/// Instantiates, binds (a sparse stage) and plans `fn`: host work only, no
/// CUDA call and no write to the executor's state, so prepareInBackground
/// may run it on another thread.
Result<std::unique_ptr<GpuExecutor::Impl::Prepared>>
GpuExecutor::Impl::planFunction(const Function &fn,
                                const std::vector<RtValue> *args) const {
  auto p = std::make_unique<Prepared>();
  p->name = fn.name;
  for (const ValueType &t : fn.argTypes)
    p->dynamic |= !isStatic(t);
  for (const ValueType &t : fn.argTypes)
    p->args.push_back(newSlot(*p, t));
  TRELLIS_RETURN_IF_ERROR(instantiate(*p, fn, p->args, p->results, p->body));
  if (p->dynamic)
    TRELLIS_RETURN_IF_ERROR(bind(*p, *args));
  TRELLIS_RETURN_IF_ERROR(plan(*p));
  return p;
}

Result<GpuExecutor::Impl::Prepared *>
GpuExecutor::Impl::prepare(const std::string &name,
                           const std::vector<RtValue> *args) {
  const Function *fn = program.find(name);
  if (!fn)
    return Error{"the program has no function '" + name + "'"};
  bool dynamic = false;
  for (const ValueType &t : fn->argTypes)
    dynamic |= !isStatic(t);
  auto it = prepared.find(name);
  if (it != prepared.end() && !dynamic)
    return it->second.get();
  if (dynamic && !args)
    return Error{"'" + name +
                 "' depends on the voxel count: it is planned "
                 "when it is called"};
  // A plan made in the background, for these arguments or (a generation
  // that failed before using it) for others: then what it took from the
  // current binding goes back.
  std::unique_ptr<Prepared> p = takePending(name);
  if (p && !sameBinding(*p, *args)) {
    if (it != prepared.end())
      inheritAllocations(*p, *it->second);
    else
      release(*p);
    p.reset();
  }
  // A sparse stage stays prepared while its coordinate arguments are the
  // same bytes (the bench and the decoders call it repeatedly).
  if (!p && it != prepared.end() && sameBinding(*it->second, *args))
    return it->second.get();
  if (!p) {
    auto planned = planFunction(*fn, args);
    if (!planned)
      return Error{planned.message()};
    p = std::move(*planned);
  }
  if (it != prepared.end())
    inheritAllocations(*it->second, *p);
  prepared[name] = std::move(p);
  return prepared[name].get();
}

std::unique_ptr<GpuExecutor::Impl::Prepared>
GpuExecutor::Impl::takePending(const std::string &name) {
  auto pending = pendingPlans.find(name);
  if (pending == pendingPlans.end())
    return nullptr;
  openResidencyGate(); // else it would wait for a run that is not coming
  auto planned = pending->second.get();
  pendingPlans.erase(pending);
  if (!planned)
    return nullptr; // planning again on this thread reports the error
  return std::move(*planned);
}

void GpuExecutor::Impl::prepareInBackground(const std::string &name,
                                            std::vector<RtValue> args) {
  const Function *fn = program.find(name);
  if (!fn)
    return;
  auto it = prepared.find(name);
  // A plan still pending from a generation that failed before using it is
  // for other coordinates: drop it, its allocations back to the binding.
  if (auto stale = takePending(name)) {
    if (it != prepared.end())
      inheritAllocations(*stale, *it->second);
    else
      release(*stale);
  }
  if (it != prepared.end() && sameBinding(*it->second, args))
    return;
  std::shared_future<void> gate; // none: plan only
  if (residentInBackground()) {
    if (residencyGateIsOpen) {
      residencyGate = std::promise<void>();
      residencyGateOpened = residencyGate.get_future().share();
      residencyGateIsOpen = false;
    }
    gate = residencyGateOpened;
  }
  Prepared *old = it != prepared.end() ? it->second.get() : nullptr;
  pendingPlans[name] = std::async(
      std::launch::async, [this, fn, args = std::move(args), old, gate] {
        return planAndMakeResident(*fn, args, old, gate);
      });
}

Result<std::unique_ptr<GpuExecutor::Impl::Prepared>>
GpuExecutor::Impl::planAndMakeResident(const Function &fn,
                                       const std::vector<RtValue> &args,
                                       Prepared *old,
                                       std::shared_future<void> gate) {
  auto planned = planFunction(fn, &args);
  if (!planned || !gate.valid())
    return planned;
  gate.wait();
  if (!makeCurrent())
    return planned;
  Prepared &p = **planned;
  // The main thread leaves `old` alone until it takes this plan (prepare()
  // waits for it first); lastResults is the main thread's.
  if (old)
    inheritAllocations(*old, p, /*forgetResults=*/false);
  // A failure here is left to the main thread: run() makes the function
  // resident again and reports it.
  if (makeResident(p, fn.name))
    p.madeResidentInBackground = true;
  return planned;
}

/// A re-bound sparse stage takes over what its previous binding allocated
/// and still fits, where it has none of its own: the staged weights (same
/// function, same weight plan), the constants, the arena and bound-value
/// pool when their capacity suffices, the pinned τ buffer. The rest of `old`
/// is released.
void GpuExecutor::Impl::inheritAllocations(Prepared &old, Prepared &p,
                                           bool forgetResults) {
  auto take = [](CUdeviceptr &from, CUdeviceptr &to) {
    to = from;
    from = 0;
  };
  if (old.weightPool && !p.weightPool && old.weightBytes == p.weightBytes)
    take(old.weightPool, p.weightPool);
  if (old.constantPool && !p.constantPool &&
      old.constantBytes == p.constantBytes) {
    take(old.constantPool, p.constantPool);
    p.constantsUploaded = old.constantsUploaded;
  }
  if (old.arena && !p.arena && old.arenaCapacity >= p.arenaBytes) {
    take(old.arena, p.arena);
    p.arenaCapacity = old.arenaCapacity;
  }
  if (old.boundPool && !p.boundPool) {
    take(old.boundPool, p.boundPool);
    p.boundCapacity = old.boundCapacity;
  }
  if (!p.pinnedTau) {
    p.pinnedTau = old.pinnedTau;
    p.pinnedTauBytes = old.pinnedTauBytes;
    old.pinnedTau = nullptr;
    old.pinnedTauBytes = 0;
  }
  release(old, forgetResults);
}

void GpuExecutor::Impl::release(Prepared &p, bool forgetResults) {
  if (forgetResults)
    lastResults.clear();
  for (auto &[first, exec] : p.graphs)
    api->cuGraphExecDestroy(exec);
  p.graphs.clear();
  for (auto l : p.layouts)
    api->cublasLtMatrixLayoutDestroy(l);
  for (auto d : p.descs)
    api->cublasLtMatmulDescDestroy(d);
  p.layouts.clear();
  p.descs.clear();
  if (p.pinnedTau) {
    api->cuStreamSynchronize(stream);
    api->cuMemFreeHost(p.pinnedTau);
    p.pinnedTau = nullptr;
    p.pinnedTauBytes = 0;
  }
  for (CUdeviceptr *m :
       {&p.arena, &p.weightPool, &p.constantPool, &p.boundPool})
    deallocate(*m);
  for (auto &[slot, copy] : p.fp8Weights)
    deallocate(copy);
  p.fp8Weights.clear();
  for (auto &[instr, scales] : p.fp8StaticScales)
    deallocate(scales);
  p.fp8StaticScales.clear();
  for (auto &[instr, running] : p.fp8Running)
    deallocate(running.at);
  p.fp8Running.clear();
  p.arenaCapacity = p.boundCapacity = 0;
  p.constantsUploaded = false;
  p.resident = false;
}

GpuExecutor::GpuExecutor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuExecutor::~GpuExecutor() = default;

/// Arguments and results up to this size each way go through pinned memory
/// (Impl::pinnedArgs / pinnedResults).
constexpr size_t kPinnedRunBytes = size_t(8) << 20;

Result<int> GpuExecutor::deviceCount() {
  auto api = cuda::loadApi(); // fails when the driver reports no GPU
  if (!api)
    return Error{api.message()};
  int count = 0;
  if (CUresult r = (*api)->cuDeviceGetCount(&count); r != CUDA_SUCCESS)
    return Error{"cuDeviceGetCount failed: " + (*api)->describe(r)};
  return count;
}

Status GpuExecutor::reduceMemoryForm(bool lowMemory, bool concurrentBranches) {
  Impl &m = *impl_;
  TRELLIS_RETURN_IF_ERROR(m.makeCurrent());
  // The plans depend on the form (the second branch's memory), so every
  // function is planned again; background preparations are waited for.
  m.openResidencyGate();
  for (auto &[name, plan] : m.pendingPlans)
    if (plan.valid())
      if (auto p = plan.get())
        m.release(**p);
  m.pendingPlans.clear();
  for (auto &[name, p] : m.prepared)
    m.release(*p);
  m.prepared.clear();
  m.options.lowMemory = m.options.lowMemory || lowMemory;
  m.options.concurrentBranches =
      m.options.concurrentBranches && concurrentBranches;
  if (!m.concurrentBranches())
    m.deallocate(m.gemmWorkspace2);
  return Status::ok();
}

Result<std::unique_ptr<GpuExecutor>>
GpuExecutor::create(const Program &program, const GpuImages &images,
                    WeightProvider weights, GpuOptions options) {
  auto impl = std::make_unique<Impl>(program, std::move(weights), options);
  TRELLIS_RETURN_IF_ERROR(impl->init(images));
  return std::unique_ptr<GpuExecutor>(new GpuExecutor(std::move(impl)));
}

Status GpuExecutor::supports(const std::string &function) {
  TRELLIS_RETURN_IF_ERROR(impl_->makeCurrent());
  auto p = impl_->prepare(function);
  if (!p)
    return Error{p.message()};
  return Status::ok();
}

void GpuExecutor::setSamplerOverrides(const std::string &function,
                                      SamplerRunOverrides overrides) {
  impl_->overrides[function] = overrides;
}

void GpuExecutor::prepareInBackground(const std::string &function,
                                      std::vector<RtValue> args) {
  impl_->prepareInBackground(function, std::move(args));
}

void GpuExecutor::setStepCallback(StepCallback callback) {
  impl_->onStep = std::move(callback);
}

void GpuExecutor::setFp8Observer(Fp8Observer observer) {
  impl_->fp8Observer = std::move(observer);
}

const GpuReport &GpuExecutor::report() const { return impl_->report; }

/// Allocates the arena and the constant pool, stages the weights (kept from
/// an earlier binding), uploads the constants and the bound values, and
/// builds the commands: once per prepared function (again after lowMemory
/// released it).
Status GpuExecutor::Impl::makeResident(Prepared &p, const std::string &name) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  };
  std::lock_guard<std::mutex> lock(buildMutex);
  p.setup = {};
  if (!p.arena) {
    size_t capacity = capacityFor(p.arenaBytes, p.dynamic);
    TRELLIS_RETURN_IF_ERROR(
        allocate(p.arena, capacity, "the activation arena of '" + name + "'"));
    p.arenaCapacity = capacity;
  }
  if (!p.weightPool)
    TRELLIS_RETURN_IF_ERROR(stageWeights(p));
  if (p.constantBytes && !p.constantPool)
    TRELLIS_RETURN_IF_ERROR(allocate(p.constantPool, p.constantBytes,
                                     "the constants of '" + name + "'"));
  resolveAddresses(p);
  const auto uploadStart = Clock::now();
  // Constants: evaluate with the reference, upload once (a re-bound stage
  // inherits them, values and all).
  if (!p.constantsUploaded)
    TRELLIS_RETURN_IF_ERROR(uploadConstants(p, p.body));
  p.constantsUploaded = true;
  TRELLIS_RETURN_IF_ERROR(uploadBound(p));
  p.setup.uploads = seconds(uploadStart);
  const auto commandStart = Clock::now();
  TRELLIS_RETURN_IF_ERROR(buildCommands(p, p.body));
  p.setup.commands = seconds(commandStart);
  if (tunedGemmsChanged)
    saveTuningCache();
  p.resident = true;
  return Status::ok();
}

/// The device address of every storage root, from its pool and offset.
void GpuExecutor::Impl::resolveAddresses(Prepared &p) {
  for (size_t s = 0; s < p.slots.size(); ++s) {
    SlotInfo &info = p.slots[s];
    if (info.root != int(s))
      continue;
    switch (info.where) {
    case SlotInfo::Where::Arena:
      info.ptr = p.arena + info.offset;
      break;
    case SlotInfo::Where::Weight:
      info.ptr = p.weightPool + info.offset;
      break;
    case SlotInfo::Where::Constant:
      info.ptr = p.constantPool + info.offset;
      break;
    default:
      break;
    }
  }
}

/// The constants of `body`: evaluated with the reference, uploaded once.
Status GpuExecutor::Impl::uploadConstants(Prepared &p, Body &body) {
  for (Node &node : body.nodes) {
    if (node.instr->op == "trellis.constant") {
      auto v = CpuExecutor::evalOp(program, *node.instr, {});
      if (!v)
        return opError(*node.instr, v.message());
      if (Status s = upload(p, node.out[0], std::get<HostTensor>((*v)[0]),
                            setupStream);
          !s)
        return opError(*node.instr, s.message());
    }
    for (Body &region : node.regions)
      TRELLIS_RETURN_IF_ERROR(uploadConstants(p, region));
  }
  return Status::ok();
}

Result<std::vector<RtValue>>
GpuExecutor::run(const std::string &name, std::vector<RtValue> args,
                 const std::vector<bool> *deviceOnly, DeviceIo *io) {
  Impl &m = *impl_;
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  };
  TRELLIS_RETURN_IF_ERROR(m.makeCurrent());
  const auto planStart = Clock::now();
  auto pr = m.prepare(name, &args);
  if (!pr)
    return Error{pr.message()};
  m.report.planSeconds = seconds(planStart);
  Impl::Prepared &p = **pr;
  const Api &api = *m.api;
  if (args.size() != p.args.size())
    return Error{"'" + name + "' takes " + std::to_string(p.args.size()) +
                 " arguments, " + std::to_string(args.size()) + " given"};
  const bool madeResidentNow = !p.resident;
  if (!p.resident)
    TRELLIS_RETURN_IF_ERROR(m.makeResident(p, name));
  // Its setup times: on this run's critical path, or (the first run of a
  // background preparation's binding) off it.
  const Impl::Prepared::SetupTimes none{};
  const auto &now = madeResidentNow ? p.setup : none;
  m.report.weightUploadSeconds = now.weights;
  m.report.uploadSeconds = now.uploads;
  m.report.commandSeconds = now.commands;
  m.report.backgroundSetupSeconds =
      p.madeResidentInBackground
          ? p.setup.weights + p.setup.uploads + p.setup.commands
          : 0;
  p.madeResidentInBackground = false; // reported
  m.report.arenaBytes = p.arenaBytes;
  m.report.weightBytes = p.weightBytes;
  m.report.constantBytes = p.constantBytes;
  // This stage's setup is done: background preparations may build theirs
  // while it runs.
  m.openResidencyGate();
  p.hostSlots.assign(p.slots.size(), RtValue{});
  bool deviceArgs = false;
  for (size_t i = 0; io && i < io->args.size(); ++i)
    deviceArgs |= io->args[i] != 0;
  if (deviceArgs) // the producers' streams have written the arguments
    if (Status s = m.check(api.cuCtxSynchronize(), "cuCtxSynchronize"); !s)
      return Error{s.message()};
  // Small host arguments go through the executor's pinned buffer: their
  // uploads need no wait (the buffer is not reused before this run's
  // synchronization). Larger ones are uploaded from the caller's memory and
  // waited for once, before any command runs: an argument may be a view of
  // memory that the run's host work reuses (without that wait trellis.exe's
  // mesh path crashed).
  auto align = [](size_t n) { return (n + 255) & ~size_t(255); };
  size_t hostArgBytes = 0;
  for (size_t i = 0; i < args.size(); ++i)
    if (auto *t = std::get_if<HostTensor>(&args[i]);
        t && !(io && i < io->args.size() && io->args[i]))
      hostArgBytes += align(t->nbytes());
  char *staging = nullptr;
  if (hostArgBytes && hostArgBytes <= kPinnedRunBytes) {
    auto b = m.pinned(m.pinnedArgs, hostArgBytes);
    if (!b)
      return Error{b.message()};
    staging = *b;
  }
  size_t stagingUsed = 0;
  bool waitForCopies = false;
  auto copyArguments = [&]() -> Status {
    for (size_t i = 0; i < args.size(); ++i) {
      auto *t = std::get_if<HostTensor>(&args[i]);
      const ValueType &type = p.slots[p.args[i]].type;
      if (!t || t->dtype() != type.dtype || t->shape() != type.shape)
        return Error{"argument " + std::to_string(i) + " of '" + name +
                     "': expected " + type.str() +
                     (t ? ", found " + shapeToString(t->shape()) + " " +
                              std::string(dtypeName(t->dtype()))
                        : ", found a non-tensor")};
      if (io && i < io->args.size() && io->args[i]) {
        if (p.slots[m.root(p, p.args[i])].where != SlotInfo::Where::Arena)
          return Error{"argument " + std::to_string(i) + " of '" + name +
                       "' is read on the host (its values shape the program): "
                       "give it in host memory"};
        if (Status s = m.check(api.cuMemcpyDtoDAsync(m.address(p, p.args[i]),
                                                     CUdeviceptr(io->args[i]),
                                                     t->nbytes(), m.stream),
                               "cuMemcpyDtoDAsync (device argument)");
            !s)
          return s;
        continue;
      }
      if (!staging) {
        waitForCopies = true;
        TRELLIS_RETURN_IF_ERROR(
            m.upload(p, p.args[i], *t, m.stream, /*wait=*/false));
        continue;
      }
      if (t->nbytes() == 0)
        continue;
      char *at = staging + stagingUsed;
      std::memcpy(at, t->raw(), t->nbytes());
      stagingUsed += align(t->nbytes());
      TRELLIS_RETURN_IF_ERROR(
          m.check(api.cuMemcpyHtoDAsync(m.address(p, p.args[i]), at,
                                        t->nbytes(), m.stream),
                  "cuMemcpyHtoDAsync (argument)"));
    }
    return Status::ok();
  };
  Status copied = copyArguments();
  if (!copied || waitForCopies)
    if (Status s = m.check(api.cuStreamSynchronize(m.stream), "the GPU stream");
        copied && !s)
      copied = s;
  if (!copied)
    return Error{copied.message()};
  if (!m.runStart) {
    api.cuEventCreate(&m.runStart, CU_EVENT_DEFAULT);
    api.cuEventCreate(&m.runStop, CU_EVENT_DEFAULT);
  }
  CUevent start = m.runStart, stop = m.runStop;
  api.cuEventRecord(start, m.stream);
  m.report.commands = 0;
  m.lastResults.clear();
  m.timings.clear();
  m.eventsUsed = 0;
  Status ran = m.runSegments(p, p.body);
  api.cuEventRecord(stop, m.stream);
  // The plain results' downloads, queued behind the commands into pinned
  // memory: they share the run's synchronization below.
  std::vector<size_t> queuedAt(p.results.size(), SIZE_MAX);
  if (ran) {
    auto plain = [&](size_t i) {
      int r = p.results[i];
      bool toDevice =
          io && i < io->resultsOnDevice.size() && io->resultsOnDevice[i];
      bool kept = deviceOnly && i < deviceOnly->size() && (*deviceOnly)[i] &&
                  !m.options.lowMemory;
      return !toDevice && !kept &&
             p.slots[m.root(p, r)].where == SlotInfo::Where::Arena &&
             !m.tokenStride(p, r);
    };
    size_t bytes = 0;
    for (size_t i = 0; i < p.results.size(); ++i)
      if (plain(i))
        bytes +=
            align(HostTensor::view(p.slots[p.results[i]].type.dtype,
                                   p.slots[p.results[i]].type.shape, nullptr)
                      .nbytes());
    char *out = nullptr;
    if (bytes && bytes <= kPinnedRunBytes)
      if (auto b = m.pinned(m.pinnedResults, bytes))
        out = *b;
    for (size_t i = 0, at = 0; out && i < p.results.size(); ++i) {
      if (!plain(i))
        continue;
      const ValueType &type = p.slots[p.results[i]].type;
      size_t n = HostTensor::view(type.dtype, type.shape, nullptr).nbytes();
      if (n && api.cuMemcpyDtoHAsync(out + at, m.address(p, p.results[i]), n,
                                     m.stream) != CUDA_SUCCESS)
        break; // downloaded the usual way below
      queuedAt[i] = at;
      at += align(n);
    }
  }
  CUresult sync = api.cuStreamSynchronize(m.stream);
  float ms = 0;
  api.cuEventElapsedTime(&ms, start, stop);
  m.report.runSeconds = ms / 1e3;
  if (!ran)
    return Error{ran.message()};
  if (m.options.profile && sync == CUDA_SUCCESS) {
    std::map<std::string, GpuReport::ProfileEntry> byWhat;
    for (auto &[what, a, b] : m.timings) {
      float t = 0;
      api.cuEventElapsedTime(&t, a, b);
      auto &e = byWhat[*what];
      e.what = *what;
      ++e.count;
      e.ms += t;
    }
    m.report.profile.clear();
    for (auto &[k, e] : byWhat)
      m.report.profile.push_back(e);
    std::sort(m.report.profile.begin(), m.report.profile.end(),
              [](const auto &x, const auto &y) { return x.ms > y.ms; });
  }
  if (sync != CUDA_SUCCESS)
    return Error{"the GPU failed while running '" + name +
                 "': " + api.describe(sync) +
                 " (run with --gpu-sync-ops to name the op that failed)"};
  if (!p.fp8Running.empty()) { // calibration: every running amax, one wait
    std::vector<std::vector<float>> amax;
    for (auto &[instr, running] : p.fp8Running) {
      amax.emplace_back(running.count);
      TRELLIS_RETURN_IF_ERROR(m.check(
          api.cuMemcpyDtoHAsync(amax.back().data(), running.at,
                                running.count * sizeof(float), m.stream),
          "cuMemcpyDtoHAsync"));
    }
    TRELLIS_RETURN_IF_ERROR(
        m.check(api.cuStreamSynchronize(m.stream), "the GPU stream"));
    size_t i = 0;
    for (auto &[instr, running] : p.fp8Running)
      m.fp8Observer(*instr, amax[i++]);
  }
  size_t freeBytes = 0, totalBytes = 0;
  api.cuMemGetInfo(&freeBytes, &totalBytes);
  m.report.deviceBytesInUse = totalBytes - freeBytes;
  const auto downloadStart = Clock::now();
  std::vector<RtValue> results;
  if (io)
    io->results.assign(p.results.size(), 0);
  for (size_t i = 0; i < p.results.size(); ++i) {
    int r = p.results[i];
    if (io && i < io->resultsOnDevice.size() && io->resultsOnDevice[i] &&
        p.slots[m.root(p, r)].where == SlotInfo::Where::Arena &&
        !m.tokenStride(p, r)) {
      // A buffer of the caller's, copied on the device.
      const ValueType &type = p.slots[r].type;
      HostTensor shapeOnly = HostTensor::view(type.dtype, type.shape, nullptr);
      CUdeviceptr buffer = 0;
      TRELLIS_RETURN_IF_ERROR(
          m.allocate(buffer, shapeOnly.nbytes(),
                     "result " + std::to_string(i) + " of '" + name + "'"));
      io->results[i] = buffer;
      if (Status s =
              m.check(api.cuMemcpyDtoDAsync(buffer, m.address(p, r),
                                            shapeOnly.nbytes(), m.stream),
                      "cuMemcpyDtoDAsync (device result)");
          !s)
        return Error{s.message()};
      results.push_back(shapeOnly);
      continue;
    }
    if (p.slots[m.root(p, r)].where == SlotInfo::Where::Host) {
      results.push_back(p.hostSlots[m.root(p, r)]);
      continue;
    }
    if (p.slots[m.root(p, r)].where == SlotInfo::Where::Bound) {
      results.push_back(p.boundValues[m.root(p, r)]);
      continue;
    }
    if (deviceOnly && i < deviceOnly->size() && (*deviceOnly)[i] &&
        !m.options.lowMemory && !m.tokenStride(p, r)) {
      const ValueType &type = p.slots[r].type;
      HostTensor shapeOnly = HostTensor::view(type.dtype, type.shape, nullptr);
      m.lastResults.push_back({nullptr, shapeOnly.nbytes(), m.address(p, r)});
      results.push_back(shapeOnly);
      continue;
    }
    if (queuedAt[i] != SIZE_MAX) {
      const ValueType &type = p.slots[r].type;
      HostTensor t(type.dtype, type.shape);
      std::memcpy(t.mutableRaw(),
                  static_cast<char *>(m.pinnedResults.data) + queuedAt[i],
                  t.nbytes());
      if (!m.options.lowMemory)
        m.lastResults.push_back({t.raw(), t.nbytes(), m.address(p, r)});
      results.push_back(std::move(t));
      continue;
    }
    auto t = m.download(p, r);
    if (!t)
      return Error{t.message()};
    if (!m.options.lowMemory && !m.tokenStride(p, r))
      m.lastResults.push_back({t->raw(), t->nbytes(), m.address(p, r)});
    results.push_back(*t);
  }
  if (io)
    if (Status s = m.check(api.cuStreamSynchronize(m.stream),
                           "cuStreamSynchronize (device results)");
        !s)
      return Error{s.message()};
  m.report.downloadSeconds = seconds(downloadStart);
  if (m.options.lowMemory)
    m.release(p);
  return results;
}

Status GpuExecutor::freeDeviceBuffer(uint64_t buffer) {
  Impl &m = *impl_;
  TRELLIS_RETURN_IF_ERROR(m.makeCurrent());
  CUdeviceptr ptr = CUdeviceptr(buffer);
  m.deallocate(ptr);
  return Status::ok();
}

Status GpuExecutor::copyToHost(uint64_t buffer, void *host, size_t bytes) {
  Impl &m = *impl_;
  TRELLIS_RETURN_IF_ERROR(m.makeCurrent());
  TRELLIS_RETURN_IF_ERROR(m.check(
      m.api->cuMemcpyDtoHAsync(host, CUdeviceptr(buffer), bytes, m.stream),
      "cuMemcpyDtoHAsync"));
  return m.check(m.api->cuStreamSynchronize(m.stream), "cuStreamSynchronize");
}

} // namespace trellis
