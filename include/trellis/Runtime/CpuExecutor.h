//===- CpuExecutor.h - Runs a host program on the CPU reference -*- C++ -*-===//
//
// Interprets the functions of a host program op by op, calling the CPU
// reference kernel of each trellis op (runtime/reference). The sampler op
// (trellis.flow_sample) runs its body once per model call, as spec §3.2-3.3
// describe. Every failure names the op and its source location from the
// bundle's location table.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_CPUEXECUTOR_H
#define TRELLIS_RUNTIME_CPUEXECUTOR_H

#include "trellis/Reference/Kernels.h"
#include "trellis/Runtime/Program.h"

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <variant>

namespace trellis {

/// A runtime value: a tensor (also neighbour maps), a coordinate set, or
/// attention segments.
using RtValue = std::variant<std::monostate, HostTensor,
                             std::shared_ptr<const ref::CoordSet>,
                             std::shared_ptr<const ref::Segments>>;

/// Binds `trellis.weight` ops: (model key, tensor name) -> the tensor.
using WeightProvider = std::function<Result<HostTensor>(
    const std::string &model, const std::string &name)>;

/// Run-time replacements of a sampler's compiled parameters.
struct SamplerRunOverrides {
  std::optional<int64_t> steps;
  std::optional<double> cfgStrength;
};

/// Calibration of an FP8 program (trellis.exe --calibrate): called at each
/// call of every FP8 linear (precision "fp8_e4m3") with the largest |x| of
/// its input (one value) and of every FP8 attention with the largest |v| of
/// each head; from any thread.
using Fp8Observer =
    std::function<void(const Instr &op, std::span<const float> amax)>;

/// Called once per sampler step: (sampler function, step k (1-based), n).
/// An error stops the sampler there (a cancelled generation) and becomes the
/// run's error.
using StepCallback =
    std::function<Status(const std::string &function, int64_t k, int64_t n)>;

class CpuExecutor {
public:
  CpuExecutor(const Program &program, WeightProvider weights);

  /// Per entry function: overrides for the flow_sample ops inside it.
  void setSamplerOverrides(const std::string &function,
                           SamplerRunOverrides overrides);
  void setStepCallback(StepCallback callback) { onStep_ = std::move(callback); }
  /// Check every f32/f16 result for NaN/Inf (names the op on failure).
  void setCheckFinite(bool on) { checkFinite_ = on; }
  /// Reports every FP8 linear's input amax (calibration); empty: off.
  void setFp8Observer(Fp8Observer observer) {
    fp8Observer_ = std::move(observer);
  }

  /// Runs function `name` on `args` (checked against its argument types).
  Result<std::vector<RtValue>> run(const std::string &name,
                                   std::vector<RtValue> args);

  /// Evaluates one op (not a region op, not a call) on `inputs` (one per
  /// operand) with the reference kernels; the GPU backend uses it to check
  /// its results op by op and to run host ops. Weights are not available.
  static Result<std::vector<RtValue>> evalOp(const Program &program,
                                             const Instr &instr,
                                             std::vector<RtValue> inputs);

private:
  struct Frame;
  class FlowSampler; // runs trellis.flow_sample (CpuExecutor.cpp)
  Result<std::vector<RtValue>> call(const Function &fn,
                                    std::vector<RtValue> args);
  Status runBody(Frame &frame, const std::vector<Instr> &body);
  Status runOp(Frame &frame, const Instr &instr);
  Status runFlowSample(Frame &frame, const Instr &instr);
  Status checkArgument(const Function &fn, size_t i, const RtValue &v) const;
  Error opError(const Instr &instr, const std::string &message) const;

  const Program &program_;
  WeightProvider weights_;
  std::map<std::string, SamplerRunOverrides> overrides_;
  std::string entry_; // the entry function being run
  StepCallback onStep_;
  Fp8Observer fp8Observer_;
  bool checkFinite_ = false;
};

} // namespace trellis

#endif // TRELLIS_RUNTIME_CPUEXECUTOR_H
