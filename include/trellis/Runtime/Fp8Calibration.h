//===- Fp8Calibration.h - Static FP8 activation scales, measured -*- C++
//-*-===//
//
// trellis.exe --calibrate N runs an FP8 program (trellisc --precision=fp8)
// with dynamic scales and records, per FP8 linear, the largest |x| its input
// reached and, per FP8 attention, the largest |v| of each head; the file it
// writes is what trellisc --fp8-scales reads (trellis-apply-fp8-scales) to
// make those scales static. A linear is named by its weight, an attention
// by its q_gamma weight, "<model key>/<checkpoint name>", the compiler
// pass's rule: a file outlives recompiles of the same models.
//
// File format (JSON):
//   {"format": "trellis-fp8-activation-scales", "version": 1,
//    "calibration": {...what was run...},
//    "amax": {"sparse_structure_flow_model/blocks.0.mlp.fc1.weight": 7.25,
//             ...},
//    "v_amax": {"sparse_structure_flow_model/blocks.0.self_attn.q_rms_norm"
//               ".gamma": [3.1, 2.7, ...one per head], ...}}
// ("v_amax" only for programs with FP8 attention.)
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_FP8CALIBRATION_H
#define TRELLIS_RUNTIME_FP8CALIBRATION_H

#include "trellis/Runtime/Program.h"

#include <nlohmann/json.hpp>

#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace trellis {

/// The calibration key of every FP8 linear (precision "fp8_e4m3") of
/// `program` whose weight operand is a trellis.weight: "<model>/<name>".
std::unordered_map<const Instr *, std::string>
fp8LinearKeys(const Program &program);

/// The calibration key of every FP8 attention (trellis.attention /
/// trellis.sparse.attention with precision "fp8_e4m3") whose q_gamma is a
/// trellis.weight: "<model>/<name>" of that weight.
std::unordered_map<const Instr *, std::string>
fp8AttentionKeys(const Program &program);

/// Whether `program` has FP8 ops (linears, or attention with precision
/// "fp8_e4m3"), how many attention ops run in FP8, and whether any op has
/// a static scale (a linear's activation_amax, an attention's v_amax).
struct Fp8ProgramKind {
  bool fp8 = false, staticScales = false;
  int attentionOps = 0;
};
Fp8ProgramKind fp8ProgramKind(const Program &program);

/// Whether a GPU of compute capability `major`.`minor` named `device` runs a
/// program with FP8 ops (`programIsFp8`: Fp8ProgramKind::fp8). Their
/// cuBLASLt E4M3 GEMMs and FP8 attention kernel run on sm_90 (Hopper) only
/// (runtime/cuda/Fp8Gemm.cpp, Fp8Attention.cpp),
/// so Engine::create refuses such a program on any other GPU with this error
/// (before any generation runs), naming the GPU and what is needed. Ok for
/// a program without FP8 linears.
Status checkFp8Device(bool programIsFp8, int major, int minor,
                      const std::string &device);

/// The largest input amax of each FP8 linear and the largest per-head v
/// amax of each FP8 attention over the runs it observes.
class Fp8Calibration {
public:
  explicit Fp8Calibration(const Program &program);

  /// One call of `op` saw `amax`: an FP8 linear's input (one value), an FP8
  /// attention's v per head. Non-finite values are ignored, as the amax
  /// reductions skip them. Thread-safe.
  void observe(const Instr &op, std::span<const float> amax);
  /// The FP8 linears' and attention ops' distinct keys, and those observed
  /// at least once.
  size_t keys() const { return linearNames_.size(); }
  size_t attentionKeys() const { return attentionNames_.size(); }
  size_t observed() const;
  /// The scales file ("about": what was run, stored as "calibration").
  /// Fails naming the first key never observed (a stage not run) or
  /// observed only as 0 (an input that was all zeros: no scale to give).
  Result<nlohmann::json> toJson(const nlohmann::json &about) const;

private:
  std::unordered_map<const Instr *, std::string> keys_, attentionKeys_;
  std::set<std::string> linearNames_, attentionNames_; ///< distinct keys
  mutable std::mutex mutex_;
  std::map<std::string, float> amax_;
  std::map<std::string, std::vector<float>> vAmax_;
};

} // namespace trellis

#endif // TRELLIS_RUNTIME_FP8CALIBRATION_H
