//===- DeviceMemory.cpp - Device allocations counted against a budget -----===//
//
// GpuExecutor::Impl::allocate / deallocate: the one place the executor asks
// the driver for device memory. Each allocation is counted; one that would
// take the executor past its budget fails with the bytes asked for and in
// use, naming the buffer, instead of reaching the driver (whose out-of-memory
// error knows neither). The planner that picks a form that fits the budget
// before any work is runtime/app/MemoryBudget.cpp; this is its backstop.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include <algorithm>
#include <string>

namespace trellis {

namespace {
/// Left to the driver out of the free memory: the CUDA graphs' executable
/// state, kernels' local memory and cuBLASLt's own buffers are allocated by
/// the driver and the libraries outside allocate().
constexpr size_t kDriverReserveBytes = size_t(192) << 20;

std::string mib(size_t bytes) {
  return std::to_string((bytes + (size_t(1) << 19)) >> 20) + " MiB";
}
} // namespace

Status GpuExecutor::Impl::measureMemoryBudget() {
  size_t free = 0, total = 0;
  TRELLIS_RETURN_IF_ERROR(check(api->cuMemGetInfo(&free, &total),
                                "cuMemGetInfo (the memory budget)"));
  const size_t available =
      free > kDriverReserveBytes ? free - kDriverReserveBytes : size_t(0);
  report.memoryBudget = options.memoryBudget
                            ? std::min(options.memoryBudget, available)
                            : available;
  report.deviceFreeAtStart = free;
  return Status::ok();
}

Status GpuExecutor::Impl::allocate(CUdeviceptr &ptr, size_t bytes,
                                   const std::string &what) {
  bytes = std::max<size_t>(bytes, 1);
  std::lock_guard<std::mutex> lock(allocationMutex);
  if (report.bytesInUse + bytes > report.memoryBudget)
    return Error{"the device memory budget is exceeded: " + what + " needs " +
                 mib(bytes) + " with " + mib(report.bytesInUse) + " of the " +
                 mib(report.memoryBudget) + " budget in use (" +
                 (options.memoryBudget ? "--memory-budget"
                                       : "the device's free memory") +
                 "; --low-memory keeps one stage's memory at a time)"};
  if (Status s = check(api->cuMemAlloc(&ptr, bytes), "cuMemAlloc"); !s) {
    ptr = 0;
    return Error{"cannot allocate " + mib(bytes) + " of device memory for " +
                 what + ": " + s.message()};
  }
  allocations[ptr] = bytes;
  report.bytesInUse += bytes;
  report.peakBytesInUse = std::max(report.peakBytesInUse, report.bytesInUse);
  return Status::ok();
}

void GpuExecutor::Impl::deallocate(CUdeviceptr &ptr) {
  if (!ptr)
    return;
  api->cuMemFree(ptr);
  std::lock_guard<std::mutex> lock(allocationMutex);
  if (auto it = allocations.find(ptr); it != allocations.end()) {
    report.bytesInUse -= it->second;
    allocations.erase(it);
  }
  ptr = 0;
}

} // namespace trellis
