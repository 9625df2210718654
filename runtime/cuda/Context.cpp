//===- Context.cpp - The CUDA context, streams and modules ----------------===//
//
// GpuExecutor::Impl::init: the dlopen'ed driver and cuBLASLt, the device, its
// primary context, the streams and GEMM workspaces, and the generated and
// attention modules of the bundle; runtimeKernel() finds a kernel of the
// runtime module. ~Impl releases all of it (the prepared functions first).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include <chrono>
#include <string>

namespace trellis {

GpuExecutor::Impl::~Impl() {
  // Background preparations: threads reading the program, maybe holding
  // device memory.
  openResidencyGate();
  std::vector<std::unique_ptr<Prepared>> pending;
  for (auto &[name, plan] : pendingPlans)
    if (plan.valid())
      if (auto p = plan.get())
        pending.push_back(std::move(*p));
  if (!api)
    return;
  (void)makeCurrent();
  for (auto &p : pending)
    release(*p);
  for (auto &[name, p] : prepared)
    release(*p);
  for (auto &[name, buffer] : flexiScratch.buffers)
    deallocate(buffer.first);
  if (staging)
    api->cuMemFreeHost(staging);
  for (CUdeviceptr *w : {&gemmWorkspace, &gemmWorkspace2, &setupWorkspace})
    deallocate(*w);
  if (setupStream)
    api->cuStreamDestroy(setupStream);
  for (CUevent e : {fork, join, runStart, runStop})
    if (e)
      api->cuEventDestroy(e);
  for (CUevent e : eventPool)
    api->cuEventDestroy(e);
  for (PinnedBuffer *b : {&pinnedArgs, &pinnedResults})
    if (b->data)
      api->cuMemFreeHost(b->data);
  if (stream2)
    api->cuStreamDestroy(stream2);
  if (lt)
    api->cublasLtDestroy(lt);
  if (generated)
    api->cuModuleUnload(generated);
  if (attention)
    api->cuModuleUnload(attention);
  if (stream)
    api->cuStreamDestroy(stream);
  if (context)
    api->cuDevicePrimaryCtxRelease(device);
}

Status GpuExecutor::Impl::loadModule(CUmodule &module, const std::string &image,
                                     const char *what) {
  char log[8192] = {0};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, reinterpret_cast<void *>(sizeof(log))};
  CUresult r = api->cuModuleLoadDataEx(&module, image.c_str(), 2, opts, values);
  if (r != CUDA_SUCCESS)
    return Error{std::string("loading the ") + what + " module failed: " +
                 api->describe(r) + (log[0] ? std::string("\n") + log : "")};
  return Status::ok();
}

Result<void *> GpuExecutor::Impl::pinnedStaging(size_t bytes) {
  if (bytes <= stagingBytes)
    return staging;
  if (staging)
    api->cuMemFreeHost(staging);
  staging = nullptr;
  stagingBytes = 0;
  size_t want = bytes + bytes / 8;
  TRELLIS_RETURN_IF_ERROR(check(api->cuMemAllocHost(&staging, want),
                                "cuMemAllocHost (upload staging)"));
  stagingBytes = want;
  return staging;
}

size_t GpuExecutor::workspaceBytes(const GpuOptions &options) {
  return kGemmWorkspaceBytes * (1 + (options.tuneGemms ? 1 : 0) +
                                (Impl::concurrentBranchesFor(options) ? 1 : 0));
}

Status GpuExecutor::Impl::init(const GpuImages &images) {
  auto loaded = cuda::loadApi();
  if (!loaded)
    return Error{loaded.message()};
  api = *loaded;
  int count = 0;
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (options.device < 0 || options.device >= count)
    return Error{"GPU device " + std::to_string(options.device) +
                 " does not exist: this machine has " + std::to_string(count) +
                 " CUDA device" + (count == 1 ? "" : "s") + " (ordinals 0.." +
                 std::to_string(std::max(count - 1, 0)) + ")"};
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuDeviceGet(&device, options.device), "cuDeviceGet"));
  char name[256] = {0};
  api->cuDeviceGetName(name, sizeof(name), device);
  int major = 0, minor = 0;
  api->cuDeviceGetAttribute(
      &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  api->cuDeviceGetAttribute(
      &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  sm = major * 10 + minor;
  api->cuDeviceGetAttribute(&multiprocessors,
                            CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  report.device = name;
  report.computeCapability = sm;
  if (sm < 75)
    return Error{std::string("the GPU '") + name + "' is sm_" +
                 std::to_string(sm) + "; trellis needs sm_75 or newer"};
  TRELLIS_RETURN_IF_ERROR(check(api->cuDevicePrimaryCtxRetain(&context, device),
                                "cuDevicePrimaryCtxRetain"));
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuCtxSetCurrent(context), "cuCtxSetCurrent"));
  TRELLIS_RETURN_IF_ERROR(check(
      api->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  const auto loadStart = std::chrono::steady_clock::now();
  // Generated kernels: on Hopper trellisc's sm_90a cubin (no JIT; where the
  // driver refuses it, e.g. one older than the toolkit that assembled it, the
  // PTX it came from), else its PTX; the portable code elsewhere, and
  // everywhere with `portable` (the code an sm_75 card runs): SASS where the
  // bundle has a cubin this device runs, else the PTX through the JIT.
  const int codeSm = options.portable ? 75 : sm;
  // The cubin of `cubins` this device runs: its major version, the highest
  // minor not above its own (SASS runs on later minors of its major). With
  // `portable` on a newer card none does (the major differs): the JIT.
  auto sassFor = [&](const std::map<int, std::string> &cubins) {
    const std::string *best = nullptr;
    int bestSm = 0;
    for (const auto &[cubinSm, image] : cubins)
      if (cubinSm / 10 == sm / 10 && cubinSm <= codeSm && cubinSm > bestSm) {
        best = &image;
        bestSm = cubinSm;
      }
    return std::make_pair(best, bestSm);
  };
  // Loads the first of (cubin, PTX) the driver takes; `how` says which.
  auto load = [&](CUmodule &module, const std::string *cubin, int cubinSm,
                  const std::string &ptx, const char *what,
                  std::string &how) -> Status {
    if (cubin && !cubin->empty()) {
      Status s = loadModule(module, *cubin, what);
      if (s) {
        how = "sass sm_" + std::to_string(cubinSm) + (cubinSm == 90 ? "a" : "");
        return s;
      }
      if (ptx.empty())
        return s;
    }
    if (ptx.empty())
      return Status::ok(); // nothing of this kind in the bundle
    how = "ptx jit";
    return loadModule(module, ptx, what);
  };
  if (codeSm == 90)
    TRELLIS_RETURN_IF_ERROR(
        load(generated, &images.cubinSm90a, 90,
             images.ptxSm90a.empty() ? images.ptxCompute75 : images.ptxSm90a,
             "generated-kernel", report.generatedImage));
  else {
    auto [cubin, cubinSm] = sassFor(images.cubinsGenerated);
    // An FP8 program's kernels (E4M3 stores) have no portable code.
    if (!cubin && images.ptxCompute75.empty() && !images.ptxSm90a.empty())
      return Error{"this program's generated kernels are built for sm_90a "
                   "only (an FP8 program, trellisc --precision=fp8), and this "
                   "run uses sm_" +
                   std::to_string(codeSm) + " code" +
                   (options.portable ? " (--gpu-arch portable)" : "") +
                   ": run it on a Hopper GPU without --gpu-arch portable, "
                   "recompile without --precision=fp8, or run with --gpu off "
                   "for the CPU reference"};
    TRELLIS_RETURN_IF_ERROR(load(generated, cubin, cubinSm, images.ptxCompute75,
                                 "generated-kernel", report.generatedImage));
  }
  // Attention: the wgmma cubin on sm_90, else the mma.sync code (sm_80's
  // from sm_80 on, sm_75's before).
  if (codeSm == 90 && !images.attnSm90a.empty()) {
    attentionFamily = TRELLIS_ATTN_SM90A;
    report.codePath = "sm_90a";
    TRELLIS_RETURN_IF_ERROR(load(attention, &images.attnSm90a, 90, "",
                                 "attention", report.attentionImage));
  } else if (codeSm >= 80 && !images.attnCompute80.empty()) {
    attentionFamily = TRELLIS_ATTN_SM80;
    report.codePath = "sm_80";
    auto [cubin, cubinSm] = sassFor(images.cubinsAttention);
    TRELLIS_RETURN_IF_ERROR(load(attention, cubin, cubinSm,
                                 images.attnCompute80, "attention",
                                 report.attentionImage));
  } else if (!images.attnCompute75.empty()) {
    attentionFamily = TRELLIS_ATTN_SM75;
    report.codePath = "sm_75";
    auto [cubin, cubinSm] = sassFor(images.cubinsAttention);
    TRELLIS_RETURN_IF_ERROR(load(attention, cubin, cubinSm,
                                 images.attnCompute75, "attention",
                                 report.attentionImage));
  }
  report.moduleLoadSeconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - loadStart)
                                 .count();
  TRELLIS_RETURN_IF_ERROR(check(api->cublasLtCreate(&lt), "cublasLtCreate"));
  loadTuningCache();
  TRELLIS_RETURN_IF_ERROR(measureMemoryBudget());
  TRELLIS_RETURN_IF_ERROR(
      allocate(gemmWorkspace, kGemmWorkspaceBytes, "the GEMM workspace"));
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuStreamCreate(&setupStream, CU_STREAM_NON_BLOCKING),
            "cuStreamCreate"));
  if (options.tuneGemms)
    TRELLIS_RETURN_IF_ERROR(allocate(setupWorkspace, kGemmWorkspaceBytes,
                                     "the setup GEMM workspace"));
  if (concurrentBranches()) {
    TRELLIS_RETURN_IF_ERROR(
        check(api->cuStreamCreate(&stream2, CU_STREAM_NON_BLOCKING),
              "cuStreamCreate"));
    TRELLIS_RETURN_IF_ERROR(allocate(gemmWorkspace2, kGemmWorkspaceBytes,
                                     "the second branch's GEMM workspace"));
    api->cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING);
    api->cuEventCreate(&join, CU_EVENT_DISABLE_TIMING);
  }
  return Status::ok();
}

Result<CUfunction> GpuExecutor::Impl::runtimeKernel(const std::string &name) {
  std::lock_guard<std::mutex> lock(functionsMutex);
  CUfunction &f = functions[name];
  if (!f) {
    if (!attention ||
        api->cuModuleGetFunction(&f, attention, name.c_str()) != CUDA_SUCCESS)
      return Error{"kernel '" + name +
                   "' is not in the bundle's runtime "
                   "kernel module"};
  }
  return f;
}

} // namespace trellis
