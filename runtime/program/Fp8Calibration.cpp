//===- Fp8Calibration.cpp - Static FP8 activation scales, measured --------===//
#include "trellis/Runtime/Fp8Calibration.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace trellis {

namespace {

bool isFp8(const Instr &instr) {
  if (!instr.hasAttr("precision"))
    return false;
  auto precision = instr.stringAttr("precision");
  return precision && *precision == "fp8_e4m3";
}

bool isFp8Linear(const Instr &instr) {
  return instr.op == "trellis.linear" && isFp8(instr);
}

bool isFp8Attention(const Instr &instr) {
  return (instr.op == "trellis.attention" ||
          instr.op == "trellis.sparse.attention") &&
         isFp8(instr);
}

/// Every instruction of `body` and of the regions inside it.
template <typename Fn> void walk(const std::vector<Instr> &body, Fn &&fn) {
  for (const Instr &instr : body) {
    fn(instr);
    for (const Region &region : instr.regions)
      walk(region.body, fn);
  }
}

} // namespace

/// "<model>/<name>" of the trellis.weight operand `keyOperand(instr)` of each
/// op (-1: the op has no key).
template <typename KeyOperand>
std::unordered_map<const Instr *, std::string>
weightKeys(const Program &program, KeyOperand &&keyOperand) {
  std::unordered_map<const Instr *, std::string> keys;
  for (const Function &fn : program.functions()) {
    // Slots are numbered per function, regions included.
    std::unordered_map<int, const Instr *> weightOf;
    walk(fn.body, [&](const Instr &instr) {
      if (instr.op == "trellis.weight" && instr.out.size() == 1)
        weightOf[instr.out[0]] = &instr;
    });
    walk(fn.body, [&](const Instr &instr) {
      const int operand = keyOperand(instr);
      if (operand < 0 || instr.in.size() <= size_t(operand))
        return;
      auto it = weightOf.find(instr.in[size_t(operand)]);
      if (it == weightOf.end())
        return;
      auto name = it->second->stringAttr("name");
      auto model = it->second->stringAttr("model");
      if (name && model)
        keys[&instr] = *model + "/" + *name;
    });
  }
  return keys;
}

std::unordered_map<const Instr *, std::string>
fp8LinearKeys(const Program &program) {
  return weightKeys(program,
                    [](const Instr &i) { return isFp8Linear(i) ? 1 : -1; });
}

std::unordered_map<const Instr *, std::string>
fp8AttentionKeys(const Program &program) {
  // q_gamma follows q, k, v (and the sparse op's segments).
  return weightKeys(program, [](const Instr &i) {
    if (!isFp8Attention(i))
      return -1;
    return i.op == "trellis.attention" ? 3 : 4;
  });
}

Fp8ProgramKind fp8ProgramKind(const Program &program) {
  Fp8ProgramKind kind;
  for (const Function &fn : program.functions())
    walk(fn.body, [&](const Instr &instr) {
      if (isFp8Attention(instr)) {
        kind.fp8 = true;
        ++kind.attentionOps;
        kind.staticScales |= instr.hasAttr("v_amax");
      }
      if (!isFp8Linear(instr))
        return;
      kind.fp8 = true;
      kind.staticScales |= instr.hasAttr("activation_amax");
    });
  return kind;
}

Status checkFp8Device(bool programIsFp8, int major, int minor,
                      const std::string &device) {
  if (!programIsFp8 || (major == 9 && minor == 0))
    return Status::ok();
  return Error{
      "--precision=fp8: this program's FP8 linears and attention run as "
      "cuBLASLt E4M3 GEMMs and sm_90a kernels, which need a GPU of compute "
      "capability 9.0 (Hopper, sm_90); " +
      (device.empty() ? std::string("this GPU") : "the GPU '" + device + "'") +
      " has compute capability " + std::to_string(major) + "." +
      std::to_string(minor) +
      ": recompile without --precision=fp8, or run with --gpu off "
      "for the CPU reference"};
}

namespace {
/// The distinct keys of `keys`, in order.
std::set<std::string>
distinctKeys(const std::unordered_map<const Instr *, std::string> &keys) {
  std::set<std::string> names;
  for (const auto &[instr, key] : keys)
    names.insert(key);
  return names;
}
} // namespace

Fp8Calibration::Fp8Calibration(const Program &program)
    : keys_(fp8LinearKeys(program)), attentionKeys_(fp8AttentionKeys(program)),
      linearNames_(distinctKeys(keys_)),
      attentionNames_(distinctKeys(attentionKeys_)) {}

void Fp8Calibration::observe(const Instr &op, std::span<const float> amax) {
  if (auto it = keys_.find(&op); it != keys_.end()) {
    if (amax.size() != 1 || !std::isfinite(amax[0]))
      return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto [entry, inserted] = amax_.try_emplace(it->second, amax[0]);
    if (!inserted)
      entry->second = std::max(entry->second, amax[0]);
    return;
  }
  auto it = attentionKeys_.find(&op);
  if (it == attentionKeys_.end())
    return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto [entry, inserted] =
      vAmax_.try_emplace(it->second, std::vector<float>(amax.size(), 0.0f));
  if (entry->second.size() != amax.size())
    return; // another head count under one key: not a calibration of this
  for (size_t h = 0; h < amax.size(); ++h)
    if (std::isfinite(amax[h]))
      entry->second[h] = std::max(entry->second[h], amax[h]);
}

size_t Fp8Calibration::observed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return amax_.size() + vAmax_.size();
}

Result<nlohmann::json>
Fp8Calibration::toJson(const nlohmann::json &about) const {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json amax = nlohmann::json::object();
  for (const std::string &key : linearNames_) {
    auto it = amax_.find(key);
    if (it == amax_.end())
      return Error{"FP8 calibration: the linear '" + key +
                   "' never ran (was its stage run?)"};
    if (!(it->second > 0.0f))
      return Error{"FP8 calibration: the input of the linear '" + key +
                   "' was all zeros in every run: no scale to give it"};
    amax[key] = it->second;
  }
  nlohmann::json file{{"format", "trellis-fp8-activation-scales"},
                      {"version", 1},
                      {"calibration", about},
                      {"amax", amax}};
  if (attentionNames_.empty())
    return file;
  nlohmann::json vAmax = nlohmann::json::object();
  for (const std::string &key : attentionNames_) {
    auto it = vAmax_.find(key);
    if (it == vAmax_.end())
      return Error{"FP8 calibration: the attention whose q_gamma is '" + key +
                   "' never ran (was its stage run?)"};
    for (size_t h = 0; h < it->second.size(); ++h)
      if (!(it->second[h] > 0.0f))
        return Error{"FP8 calibration: v of head " + std::to_string(h) +
                     " of the attention whose q_gamma is '" + key +
                     "' was all zeros in every run: no scale to give it"};
    vAmax[key] = it->second;
  }
  file["v_amax"] = vAmax;
  return file;
}

} // namespace trellis
