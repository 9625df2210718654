//===- OpCheck.cpp - Checks each GPU op against the CPU reference ---------===//
//
// The --gpu-check-ops and --check-finite machinery: after an op, its results
// are downloaded and compared with the CPU reference evaluated on the same
// inputs, and every input must still hold what its producer wrote (a hash);
// a failure names the values that share the storage.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include "trellis/Runtime/CpuExecutor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace trellis {

std::shared_ptr<const ref::Segments>
GpuExecutor::Impl::segmentsFromDevice(const HostTensor &t, int64_t rows) {
  auto seg = std::make_shared<ref::Segments>();
  seg->rows = HostTensor(DType::I32, {rows});
  const int32_t *d = t.data<int32_t>();
  std::memcpy(seg->rows.mutableRaw(), d, size_t(rows) * 4);
  std::vector<int32_t> offsets{0};
  for (int64_t i = rows + 1; i < t.numel(); ++i)
    if (d[i] != offsets.back())
      offsets.push_back(d[i]);
  seg->offsets = HostTensor(DType::I32, {int64_t(offsets.size())});
  std::memcpy(seg->offsets.mutableRaw(), offsets.data(), offsets.size() * 4);
  return seg;
}

/// The arena values that share storage with `slot`'s root, with their live
/// ranges (--gpu-check-ops: an operand that changed under its reader).
std::string GpuExecutor::Impl::storageNeighbours(const Prepared &p,
                                                 int slot) const {
  std::map<int, std::string> producer;
  std::function<void(const Body &)> collect = [&](const Body &body) {
    for (const Node &node : body.nodes) {
      for (int o : node.out)
        producer[o] = node.instr->op;
      if (node.scratch >= 0)
        producer[node.scratch] = node.instr->op + " (scratch)";
      for (int l : node.loopSlots)
        producer[l] = node.instr->op + " (loop state)";
      for (const Body &region : node.regions) {
        for (int a : region.args)
          producer[a] = node.instr->op + " (region argument)";
        collect(region);
      }
    }
  };
  collect(p.body);
  int r = root(p, slot);
  const SlotInfo &self = p.slots[r];
  size_t from = self.offset, to = from + bytesOf(self.type);
  std::string out =
      "; its storage (slot " + std::to_string(r) + ", arena bytes [" +
      std::to_string(from) + ", " + std::to_string(to) + "), live [" +
      std::to_string(self.def) + ", " + std::to_string(self.last) + "], lane " +
      std::to_string(self.lane) + ") is shared with:";
  for (size_t s = 0; s < p.slots.size(); ++s) {
    const SlotInfo &o = p.slots[s];
    if (int(s) == r || o.root != int(s) || o.where != SlotInfo::Where::Arena)
      continue;
    size_t a = o.offset, b = a + bytesOf(o.type);
    if (b <= from || to <= a)
      continue;
    out += " slot " + std::to_string(s) + " '" + producer[int(s)] + "' live [" +
           std::to_string(o.def) + ", " + std::to_string(o.last) + "] lane " +
           std::to_string(o.lane) + ";";
  }
  return out;
}

/// FNV-1a over a tensor's bytes (--gpu-check-ops: has a value changed?).
static uint64_t hashBytes(const HostTensor &t) {
  uint64_t h = 1469598103934665603ull;
  const auto *bytes = static_cast<const unsigned char *>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i)
    h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

Status GpuExecutor::Impl::checkNode(Prepared &p, const Node &node) {
  const Instr &instr = *node.instr;
  if (Status s = check(api->cuStreamSynchronize(stream), "the GPU stream"); !s)
    return opError(instr, s.message());
  std::vector<HostTensor> gpu;
  for (int s : node.out) {
    auto t = download(p, s);
    if (!t)
      return opError(instr, t.message());
    gpu.push_back(*t);
  }
  if (options.checkFinite)
    for (size_t i = 0; i < gpu.size(); ++i) {
      HostTensor f = gpu[i].toFloat32();
      for (int64_t j = 0; j < f.numel(); ++j)
        if (!std::isfinite(f.data<float>()[j]))
          return opError(instr, "result " + std::to_string(i) +
                                    " has a non-finite value (--check-finite)");
    }
  if (!options.checkOps)
    return Status::ok();
  // Inputs as the GPU holds them (views of weights included).
  std::vector<RtValue> inputs;
  for (size_t i = 0; i < node.in.size(); ++i) {
    int s = node.in[i];
    if (p.slots[root(p, s)].where == SlotInfo::Where::Bound) {
      inputs.push_back(p.boundValues[root(p, s)]);
      continue;
    }
    if (const SlotInfo &w = p.slots[root(p, s)]; w.fp8) {
      // Staged in E4M3: the reference quantizes the checkpoint's f16 itself.
      auto t = weights(w.weightModel, w.weightName);
      if (!t)
        return opError(instr, t.message());
      inputs.push_back(*t);
      continue;
    }
    auto t = download(p, s);
    if (!t)
      return opError(instr, t.message());
    // Still what its producer wrote? (A storage plan that lets a later op
    // overwrite a live value, or a view of the wrong storage, passes every
    // op's own check and only shows in the end result.)
    // A value no command wrote (a reshape, a branch's shared argument) is
    // the one it views: up the view chain to the nearest written value
    // (split views are written: their view nodes are checked too).
    int from = s;
    while (!p.writtenHashes.count(from) && p.slots[from].root != from)
      from = p.slots[from].root;
    if (auto w = p.writtenHashes.find(from); w != p.writtenHashes.end())
      if (hashBytes(*t) != w->second.first)
        return opError(instr, "operand " + std::to_string(i) +
                                  " no longer holds what '" +
                                  w->second.second->op + "' " +
                                  program.describe(w->second.second->loc) +
                                  " wrote: the storage plan let another "
                                  "command overwrite it, or it reads the "
                                  "wrong storage" +
                                  storageNeighbours(p, from));
    if (auto w = p.windows.find(root(p, s)); w != p.windows.end())
      inputs.push_back(segmentsFromDevice(*t, w->second.rows));
    else
      inputs.push_back(*t);
  }
  // The CPU reference applies activations etc. from the same attributes.
  auto ref = CpuExecutor::evalOp(program, instr, std::move(inputs));
  if (!ref)
    return opError(instr, "the CPU reference failed: " + ref.message());
  for (size_t i = 0; i < gpu.size(); ++i)
    p.writtenHashes[node.out[i]] = {hashBytes(gpu[i]), &instr};
  for (size_t i = 0; i < gpu.size(); ++i) {
    // A window partition computed on the device: the same rows in the same
    // order, the same segments once the empty windows are dropped.
    if (auto *seg =
            std::get_if<std::shared_ptr<const ref::Segments>>(&(*ref)[i]);
        seg && *seg && p.windows.count(node.out[i])) {
      auto got = segmentsFromDevice(gpu[i], p.windows.at(node.out[i]).rows);
      const ref::Segments &want = **seg;
      auto same = [](const HostTensor &a, const HostTensor &b) {
        return a.shape() == b.shape() &&
               std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
      };
      ++report.checkedOps;
      if (!same(got->rows, want.rows) || !same(got->offsets, want.offsets))
        return opError(instr, "the device window partition differs from the "
                              "CPU reference's");
      continue;
    }
    auto *want = std::get_if<HostTensor>(&(*ref)[i]);
    if (!want)
      continue;
    HostTensor a = gpu[i].toFloat32(), b = want->toFloat32();
    double num = 0, den = 0, maxAbs = 0;
    for (int64_t j = 0; j < a.numel(); ++j) {
      double d = double(a.data<float>()[j]) - double(b.data<float>()[j]);
      num += d * d;
      den += double(b.data<float>()[j]) * b.data<float>()[j];
      maxAbs = std::max(maxAbs, std::abs(d));
    }
    double rel = std::sqrt(num / std::max(den, 1e-30));
    if (den == 0)
      rel = std::sqrt(num);
    ++report.checkedOps;
    if (rel > report.worstCheckError) {
      report.worstCheckError = rel;
      report.worstCheckOp = instr.op + " " + program.describe(instr.loc);
    }
    if (std::isnan(num))
      return opError(instr, "result " + std::to_string(i) +
                                " holds NaN/Inf on the GPU or in the CPU "
                                "reference run on the GPU's inputs (an "
                                "input of the op holds one)");
    if (!(rel <= options.checkTolerance))
      return opError(instr, "result " + std::to_string(i) +
                                " differs from the CPU reference: relative "
                                "L2 error " +
                                std::to_string(rel) + ", max abs " +
                                std::to_string(maxAbs) + " (tolerance " +
                                std::to_string(options.checkTolerance) + ")");
  }
  return Status::ok();
}

} // namespace trellis
