//===- CudaApi.h - The CUDA driver and cuBLASLt, loaded at run time -------===//
//
// trellis.exe must start (and fall back to the CPU reference with a notice)
// on machines without an NVIDIA driver, so it never links libcuda or
// cuBLASLt: this table is filled with dlopen/dlsym on first use. The entry
// names come from the toolkit headers' own #defines (cuMemAlloc is
// cuMemAlloc_v2, ...), so every pointer has the ABI the header declares.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_CUDA_CUDAAPI_H
#define TRELLIS_RUNTIME_CUDA_CUDAAPI_H

#include "trellis/Support/Result.h"

#include <cublasLt.h>
#include <cuda.h>

#include <string>

namespace trellis::cuda {

#define TRELLIS_CUDA_DRIVER_FUNCTIONS(X)                                       \
  X(cuInit)                                                                    \
  X(cuDriverGetVersion)                                                        \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDeviceTotalMem)                                                          \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuDevicePrimaryCtxRelease)                                                 \
  X(cuCtxSetCurrent)                                                           \
  X(cuCtxSynchronize)                                                          \
  X(cuMemGetInfo)                                                              \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemAllocHost)                                                            \
  X(cuMemFreeHost)                                                             \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemcpyDtoHAsync)                                                         \
  X(cuMemcpyDtoDAsync)                                                         \
  X(cuMemsetD8Async)                                                           \
  X(cuMemsetD32Async)                                                          \
  X(cuStreamCreate)                                                            \
  X(cuStreamDestroy)                                                           \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamWaitEvent)                                                         \
  X(cuStreamBeginCapture)                                                      \
  X(cuStreamEndCapture)                                                        \
  X(cuGraphInstantiate)                                                        \
  X(cuGraphLaunch)                                                             \
  X(cuGraphExecDestroy)                                                        \
  X(cuGraphDestroy)                                                            \
  X(cuEventCreate)                                                             \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuEventElapsedTime)                                                        \
  X(cuEventDestroy)                                                            \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)

#define TRELLIS_CUBLASLT_FUNCTIONS(X)                                          \
  X(cublasLtCreate)                                                            \
  X(cublasLtDestroy)                                                           \
  X(cublasLtGetStatusString)                                                   \
  X(cublasLtGetVersion)                                                        \
  X(cublasLtMatmulDescCreate)                                                  \
  X(cublasLtMatmulDescDestroy)                                                 \
  X(cublasLtMatmulDescSetAttribute)                                            \
  X(cublasLtMatrixLayoutCreate)                                                \
  X(cublasLtMatrixLayoutDestroy)                                               \
  X(cublasLtMatrixLayoutSetAttribute)                                          \
  X(cublasLtMatmulPreferenceCreate)                                            \
  X(cublasLtMatmulPreferenceDestroy)                                           \
  X(cublasLtMatmulPreferenceSetAttribute)                                      \
  X(cublasLtMatmulAlgoGetHeuristic)                                            \
  X(cublasLtMatmulAlgoConfigGetAttribute)                                      \
  X(cublasLtMatmul)

/// Function pointers of the driver and cuBLASLt. Members are named like the
/// API functions: `api.cuMemAlloc(...)` calls the right versioned entry.
struct Api {
#define TRELLIS_CUDA_MEMBER(fn) decltype(&::fn) fn = nullptr;
  TRELLIS_CUDA_DRIVER_FUNCTIONS(TRELLIS_CUDA_MEMBER)
  TRELLIS_CUBLASLT_FUNCTIONS(TRELLIS_CUDA_MEMBER)
#undef TRELLIS_CUDA_MEMBER

  /// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string describe(CUresult r) const;
  std::string describe(cublasStatus_t s) const;
};

/// Loads libcuda.so.1 and libcublasLt (once per process) and calls cuInit.
/// The error says which library or symbol is missing, or what cuInit said;
/// callers use it as the reason for falling back to the CPU.
Result<const Api *> loadApi();

} // namespace trellis::cuda

#endif // TRELLIS_RUNTIME_CUDA_CUDAAPI_H
