//===- WeightStaging.cpp - Host <-> device copies: weights, values --------===//
//
// stageWeights() streams the weights of a prepared function from the mapped
// safetensors through two pinned chunks into its device weight pool (on the
// setup stream);
// download() and upload() copy one value slot (a strided view gathered row
// by row) between the device and a host tensor.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <vector>

namespace trellis {

Status GpuExecutor::Impl::stageWeights(Prepared &p) {
  auto start = std::chrono::steady_clock::now();
  if (p.weightBytes == 0)
    return Status::ok();
  TRELLIS_RETURN_IF_ERROR(
      allocate(p.weightPool, p.weightBytes, "the weights of '" + p.name + "'"));
  size_t half = std::max<size_t>(options.stagingBytes / 2, 1 << 20);
  void *pinned = nullptr;
  TRELLIS_RETURN_IF_ERROR(check(api->cuMemAllocHost(&pinned, 2 * half),
                                "cuMemAllocHost (staging buffer)"));
  CUevent done[2] = {nullptr, nullptr};
  for (CUevent &e : done)
    api->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
  bool used[2] = {false, false};
  int buffer = 0;
  std::set<size_t> uploaded;
  Status status = Status::ok();
  // An E4M3-stored weight (SlotInfo::fp8) goes up as f16 into this buffer
  // and is quantized from there into the pool (runtime/kernels/fp8.cuh, the
  // CPU reference's arithmetic), on the same stream.
  CUdeviceptr f16Staging = 0;
  size_t f16StagingBytes = 0;
  for (const SlotInfo &info : p.slots)
    if (info.where == SlotInfo::Where::Weight && info.fp8)
      f16StagingBytes = std::max(f16StagingBytes, bytesOf(info.type));
  if (f16StagingBytes)
    status =
        allocate(f16Staging, f16StagingBytes,
                 "the f16 staging of the E4M3 weights of '" + p.name + "'");
  for (size_t s = 0; s < p.slots.size() && status; ++s) {
    const SlotInfo &info = p.slots[s];
    if (info.where != SlotInfo::Where::Weight ||
        !uploaded.insert(info.offset).second)
      continue;
    auto t = weights(info.weightModel, info.weightName);
    if (!t) {
      status = Error{t.message()};
      break;
    }
    if (t->dtype() != info.type.dtype || t->shape() != info.type.shape) {
      status = Error{
          "weight '" + info.weightName + "' of '" + info.weightModel +
          "': the bundle expects " + info.type.str() + ", the file holds " +
          shapeToString(t->shape()) + " " + std::string(dtypeName(t->dtype()))};
      break;
    }
    const char *src = static_cast<const char *>(t->raw());
    size_t n = t->nbytes();
    const CUdeviceptr to = info.fp8 ? f16Staging : p.weightPool + info.offset;
    for (size_t done_ = 0; done_ < n;) {
      size_t chunk = std::min(half, n - done_);
      if (used[buffer])
        api->cuEventSynchronize(done[buffer]);
      char *dst = static_cast<char *>(pinned) + buffer * half;
      std::memcpy(dst, src + done_, chunk);
      if (Status c =
              check(api->cuMemcpyHtoDAsync(to + done_, dst, chunk, setupStream),
                    "cuMemcpyHtoDAsync (weights)");
          !c) {
        status = c;
        break;
      }
      api->cuEventRecord(done[buffer], setupStream);
      used[buffer] = true;
      buffer ^= 1;
      done_ += chunk;
    }
    if (info.fp8 && status) {
      const size_t elements = n / 2;
      const CUdeviceptr q = p.weightPool + info.offset;
      const CUdeviceptr amax = q + alignUp(elements);
      if (Status c = quantizeFp8(f16Staging, elements, q, amax, amax + kAlign,
                                 setupStream);
          !c)
        status = Error{"weight '" + info.weightName + "' of '" +
                       info.weightModel + "': " + c.message()};
    }
  }
  if (Status c = check(api->cuStreamSynchronize(setupStream), "weight staging");
      !c && status)
    status = c;
  for (CUevent e : done)
    api->cuEventDestroy(e);
  api->cuMemFreeHost(pinned);
  deallocate(f16Staging);
  p.setup.weights =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return status;
}

Result<HostTensor> GpuExecutor::Impl::download(const Prepared &p, int slot) {
  const SlotInfo &info = p.slots[slot];
  HostTensor t(info.type.dtype, info.type.shape);
  if (t.nbytes() == 0)
    return t;
  if (int64_t stride = tokenStride(p, slot)) {
    // A strided view ([B, L, H, d] or sparse [N, H, d]): gather its token
    // rows.
    int64_t tokens = 1;
    for (size_t d = 0; d + 2 < info.type.shape.size(); ++d)
      tokens *= info.type.shape[d];
    size_t row = t.nbytes() / size_t(tokens), elem = dtypeSize(t.dtype());
    std::vector<char> span(size_t((tokens - 1) * stride) * elem + row);
    TRELLIS_RETURN_IF_ERROR(
        check(api->cuMemcpyDtoHAsync(span.data(), address(p, slot), span.size(),
                                     stream),
              "cuMemcpyDtoHAsync"));
    TRELLIS_RETURN_IF_ERROR(
        check(api->cuStreamSynchronize(stream), "the GPU stream"));
    for (int64_t i = 0; i < tokens; ++i)
      std::memcpy(static_cast<char *>(t.mutableRaw()) + i * row,
                  span.data() + size_t(i * stride) * elem, row);
    return t;
  }
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuMemcpyDtoHAsync(t.mutableRaw(), address(p, slot), t.nbytes(),
                                   stream),
            "cuMemcpyDtoHAsync"));
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuStreamSynchronize(stream), "the GPU stream"));
  return t;
}

Result<char *> GpuExecutor::Impl::pinned(PinnedBuffer &buffer, size_t bytes) {
  if (buffer.bytes < bytes) {
    if (buffer.data)
      api->cuMemFreeHost(buffer.data);
    buffer = PinnedBuffer{};
    void *data = nullptr;
    TRELLIS_RETURN_IF_ERROR(
        check(api->cuMemAllocHost(&data, bytes), "cuMemAllocHost (run I/O)"));
    buffer = PinnedBuffer{data, bytes};
  }
  return static_cast<char *>(buffer.data);
}

Status GpuExecutor::Impl::upload(const Prepared &p, int slot,
                                 const HostTensor &t, CUstream on, bool wait) {
  if (t.nbytes() == 0)
    return Status::ok();
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuMemcpyHtoDAsync(address(p, slot), t.raw(), t.nbytes(), on),
            "cuMemcpyHtoDAsync"));
  if (!wait)
    return Status::ok();
  // The host tensor may die when we return: wait for the copy.
  return check(api->cuStreamSynchronize(on), "the GPU stream");
}

} // namespace trellis
