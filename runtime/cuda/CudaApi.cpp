//===- CudaApi.cpp - dlopen of the CUDA driver and cuBLASLt ---------------===//
#include "runtime/cuda/CudaApi.h"

#include <dlfcn.h>

#include <mutex>

namespace trellis::cuda {

// Stringizes after macro expansion: NAME(cuMemAlloc) is "cuMemAlloc_v2".
#define TRELLIS_CUDA_NAME_(x) #x
#define TRELLIS_CUDA_NAME(x) TRELLIS_CUDA_NAME_(x)

std::string Api::describe(CUresult r) const {
  const char *name = nullptr, *text = nullptr;
  if (cuGetErrorName)
    cuGetErrorName(r, &name);
  if (cuGetErrorString)
    cuGetErrorString(r, &text);
  std::string s = name ? name : "CUDA error " + std::to_string(int(r));
  if (text)
    s += std::string(" (") + text + ")";
  return s;
}

std::string Api::describe(cublasStatus_t s) const {
  const char *text =
      cublasLtGetStatusString ? cublasLtGetStatusString(s) : nullptr;
  return text ? text : "cuBLAS status " + std::to_string(int(s));
}

namespace {

Result<void *> openFirst(std::initializer_list<const char *> names) {
  std::string tried;
  for (const char *n : names) {
    if (void *h = dlopen(n, RTLD_NOW | RTLD_LOCAL))
      return h;
    tried += std::string(tried.empty() ? "" : ", ") + n;
  }
  const char *why = dlerror();
  return Error{"cannot load " + tried + (why ? std::string(": ") + why : "")};
}

Result<Api> load() {
  Api api;
  auto driver = openFirst({"libcuda.so.1", "libcuda.so"});
  if (!driver)
    return Error{"no NVIDIA driver: " + driver.message()};
  auto lt = openFirst({"libcublasLt.so.13", "libcublasLt.so",
                       "/usr/local/cuda/lib64/libcublasLt.so.13"});
  if (!lt)
    return Error{"no cuBLASLt: " + lt.message()};
#define TRELLIS_CUDA_BIND(handle, fn)                                          \
  api.fn = reinterpret_cast<decltype(api.fn)>(                                 \
      dlsym(*handle, TRELLIS_CUDA_NAME(fn)));                                  \
  if (!api.fn)                                                                 \
    return Error{std::string("the CUDA libraries lack ") +                     \
                 TRELLIS_CUDA_NAME(fn)};
#define TRELLIS_CUDA_BIND_DRIVER(fn) TRELLIS_CUDA_BIND(driver, fn)
#define TRELLIS_CUDA_BIND_LT(fn) TRELLIS_CUDA_BIND(lt, fn)
  TRELLIS_CUDA_DRIVER_FUNCTIONS(TRELLIS_CUDA_BIND_DRIVER)
  TRELLIS_CUBLASLT_FUNCTIONS(TRELLIS_CUDA_BIND_LT)
#undef TRELLIS_CUDA_BIND_LT
#undef TRELLIS_CUDA_BIND_DRIVER
#undef TRELLIS_CUDA_BIND
  if (CUresult r = api.cuInit(0); r != CUDA_SUCCESS)
    return Error{"cuInit failed: " + api.describe(r)};
  int count = 0;
  if (CUresult r = api.cuDeviceGetCount(&count); r != CUDA_SUCCESS)
    return Error{"cuDeviceGetCount failed: " + api.describe(r)};
  if (count == 0)
    return Error{"the NVIDIA driver reports no GPU"};
  return api;
}

} // namespace

Result<const Api *> loadApi() {
  static std::once_flag once;
  static Result<Api> api = Error{"not loaded"};
  std::call_once(once, [] { api = load(); });
  if (!api)
    return Error{api.message()};
  return &*api;
}

} // namespace trellis::cuda
