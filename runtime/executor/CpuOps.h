//===- CpuOps.h - The CPU executor's op table (private) ---------*- C++ -*-===//
//
// What the op-family files (ElementwiseOps.cpp, LinearOps.cpp, ...) share
// with CpuExecutor.cpp: the operand accessor, the context one op runs in, and
// the one table from op name to the function that runs it on the reference
// kernels. Each family file registers its ops with its register*Ops function.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_EXECUTOR_CPUOPS_H
#define TRELLIS_RUNTIME_EXECUTOR_CPUOPS_H

#include "trellis/Runtime/CpuExecutor.h"

#include <cassert>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace trellis {
namespace cpu {

using CoordsPtr = std::shared_ptr<const ref::CoordSet>;
using SegmentsPtr = std::shared_ptr<const ref::Segments>;

/// Operand access with the op's name in errors.
struct Operands {
  const Instr &instr;
  std::vector<RtValue> &slots;

  size_t size() const { return instr.in.size(); }
  Result<HostTensor> tensor(size_t i) const {
    if (i >= instr.in.size())
      return Error{"missing operand " + std::to_string(i)};
    if (auto *t = std::get_if<HostTensor>(&slots[instr.in[i]]))
      return *t;
    return Error{"operand " + std::to_string(i) + " is not a tensor"};
  }
  Result<CoordsPtr> coords(size_t i) const {
    if (i < instr.in.size())
      if (auto *c = std::get_if<CoordsPtr>(&slots[instr.in[i]]))
        return *c;
    return Error{"operand " + std::to_string(i) + " is not a coordinate set"};
  }
  Result<SegmentsPtr> segments(size_t i) const {
    if (i < instr.in.size())
      if (auto *s = std::get_if<SegmentsPtr>(&slots[instr.in[i]]))
        return *s;
    return Error{"operand " + std::to_string(i) + " is not a segment set"};
  }
};

/// Calls a function of the program (func.call).
using CallFn = std::function<Result<std::vector<RtValue>>(
    const Function &fn, std::vector<RtValue> args)>;

/// What one op runs with: the instruction, its operands, the results it
/// fills (`out`, one per result of the instruction), and the few things of
/// the executor that some ops need.
struct OpContext {
  const Instr &instr;
  const Operands &in;
  std::vector<RtValue> &out;
  const Program &program;
  /// Binds trellis.weight (empty in CpuExecutor::evalOp).
  const WeightProvider &weights;
  /// The run-time sampler overrides per entry function, and the entry
  /// function being run (trellis.time_grid follows its steps override).
  const std::map<std::string, SamplerRunOverrides> &samplerOverrides;
  const std::string &entry;
  /// Runs a function of the program (func.call).
  const CallFn &call;
  /// Calibration: told every FP8 linear's input amax (null: off).
  const Fp8Observer *fp8Observer = nullptr;

  /// Stores the single tensor result (or passes on the error).
  Status single(Result<HostTensor> r) const {
    if (!r)
      return Error{r.message()};
    out.push_back(std::move(r).value());
    return Status::ok();
  }
  /// Operand `i` if it is present and a tensor.
  std::optional<HostTensor> optTensor(size_t i) const {
    auto t = in.tensor(i);
    if (t)
      return *t;
    return std::nullopt;
  }
  /// Stores a coordinate-set result (or passes on the error).
  Status coordsOut(Result<ref::CoordSet> c) const {
    if (!c)
      return Error{c.message()};
    out.push_back(std::make_shared<const ref::CoordSet>(std::move(c).value()));
    return Status::ok();
  }
  /// Stores a segment-set result (or passes on the error).
  Status segmentsOut(Result<ref::Segments> s) const {
    if (!s)
      return Error{s.message()};
    out.push_back(std::make_shared<const ref::Segments>(std::move(s).value()));
    return Status::ok();
  }
};

/// Runs one op: fills ctx.out or returns an error (CpuExecutor::runOp wraps
/// it with the op's location).
using OpFn = std::function<Status(const OpContext &ctx)>;
/// Op name -> the function that runs it.
using OpTable = std::unordered_map<std::string, OpFn>;

/// Adds `name` to the table (each op is registered once).
inline void addOp(OpTable &table, const std::string &name, OpFn fn) {
  bool inserted = table.emplace(name, std::move(fn)).second;
  assert(inserted && "op registered twice");
  (void)inserted;
}

/// Optional integer / float / boolean attributes.
inline int64_t intOr(const Instr &i, const char *name, int64_t fallback) {
  auto v = i.intAttr(name);
  return v ? *v : fallback;
}
inline double floatOr(const Instr &i, const char *name, double fallback) {
  auto v = i.floatAttr(name);
  return v ? *v : fallback;
}
/// An optional BoolAttr (a JSON boolean in the program).
inline bool boolOr(const Instr &i, const char *name, bool fallback) {
  auto it = i.attrs.find(name);
  return it != i.attrs.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// The op families, one file each.
void registerElementwiseOps(OpTable &table); // ElementwiseOps.cpp
void registerLinearOps(OpTable &table);      // LinearOps.cpp
void registerNormOps(OpTable &table);        // NormOps.cpp
void registerAttentionOps(OpTable &table);   // AttentionOps.cpp
void registerShapeOps(OpTable &table);       // ShapeOps.cpp
void registerSparseOps(OpTable &table);      // SparseOps.cpp
void registerSamplerOps(OpTable &table);     // SamplerOps.cpp

} // namespace cpu
} // namespace trellis

#endif // TRELLIS_RUNTIME_EXECUTOR_CPUOPS_H
