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
  // PTX it came from), else its PTX; the portable PTX elsewhere, and
  // everywhere with `portable` (the code an sm_75 card runs).
  const int codeSm = options.portable ? 75 : sm;
  bool cubinLoaded = false;
  if (codeSm == 90 && !images.cubinSm90a.empty())
    cubinLoaded =
        bool(loadModule(generated, images.cubinSm90a, "generated-kernel"));
  const std::string &ptx = codeSm == 90 && !images.ptxSm90a.empty()
                               ? images.ptxSm90a
                               : images.ptxCompute75;
  if (!cubinLoaded && !ptx.empty())
    TRELLIS_RETURN_IF_ERROR(loadModule(generated, ptx, "generated-kernel"));
  // Attention: the wgmma cubin on sm_90, else the mma.sync PTX.
  if (codeSm == 90 && !images.attnSm90a.empty()) {
    attentionFamily = TRELLIS_ATTN_SM90A;
    report.codePath = "sm_90a";
    TRELLIS_RETURN_IF_ERROR(
        loadModule(attention, images.attnSm90a, "attention"));
  } else if (codeSm >= 80 && !images.attnCompute80.empty()) {
    attentionFamily = TRELLIS_ATTN_SM80;
    report.codePath = "sm_80";
    TRELLIS_RETURN_IF_ERROR(
        loadModule(attention, images.attnCompute80, "attention"));
  } else if (!images.attnCompute75.empty()) {
    attentionFamily = TRELLIS_ATTN_SM75;
    report.codePath = "sm_75";
    TRELLIS_RETURN_IF_ERROR(
        loadModule(attention, images.attnCompute75, "attention"));
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
