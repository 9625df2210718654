//===- NoCuda.cpp - GpuExecutor when built without the CUDA toolkit -------===//
#include "trellis/Runtime/GpuExecutor.h"

namespace trellis {

struct GpuExecutor::Impl {
  GpuReport report;
};

GpuExecutor::GpuExecutor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuExecutor::~GpuExecutor() = default;

Result<std::unique_ptr<GpuExecutor>> GpuExecutor::create(const Program &,
                                                         const GpuImages &,
                                                         WeightProvider,
                                                         GpuOptions) {
  return Error{"this runtime was built without the CUDA backend"};
}
Result<GpuMemoryPlan> GpuExecutor::planMemory(const Program &,
                                              const std::string &, GpuOptions,
                                              const std::vector<RtValue> *) {
  return Error{"this runtime was built without the CUDA backend"};
}
Status GpuExecutor::reduceMemoryForm(bool, bool) {
  return Error{"built without the CUDA backend"};
}
size_t GpuExecutor::workspaceBytes(const GpuOptions &) { return 0; }
Result<int> GpuExecutor::deviceCount() {
  return Error{"this runtime was built without the CUDA backend"};
}
Status GpuExecutor::supports(const std::string &) {
  return Error{"built without the CUDA backend"};
}
void GpuExecutor::setSamplerOverrides(const std::string &,
                                      SamplerRunOverrides) {}
void GpuExecutor::setStepCallback(StepCallback) {}
Result<std::vector<RtValue>> GpuExecutor::run(const std::string &,
                                              std::vector<RtValue>,
                                              const std::vector<bool> *,
                                              DeviceIo *) {
  return Error{"built without the CUDA backend"};
}
Status GpuExecutor::freeDeviceBuffer(uint64_t) {
  return Error{"built without the CUDA backend"};
}
Status GpuExecutor::copyToHost(uint64_t, void *, size_t) {
  return Error{"built without the CUDA backend"};
}
const GpuReport &GpuExecutor::report() const { return impl_->report; }
Result<mesh::MeshResult>
GpuExecutor::extractFlexiCubes(const HostTensor &, const HostTensor &, int) {
  return Error{"built without the CUDA backend"};
}

} // namespace trellis
