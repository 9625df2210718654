//===- ApplyFp8Scales.cpp - Static FP8 activation scales ------------------===//
//
// An FP8 linear with a dynamic scale pays a pass over its input (the amax)
// before every GEMM; a static scale, the largest |x| a calibration run saw
// (trellis.exe --calibrate), removes it. This pass reads the calibration
// file and sets each FP8 linear's activation_amax and, where the file has
// them ("v_amax"), each FP8 attention's per-head v_amax (which removes the
// attention's v amax pass). The key of a linear is its weight's
// "<model>/<name>", of an attention its q_gamma weight's, the same rule as
// the runtime's calibration (runtime/program/Fp8Calibration.cpp), so a file
// outlives recompiles of the same models. Part of the graph phase, when
// trellisc --fp8-scales names a file.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "mlir/IR/Verifier.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <map>
#include <set>
#include <vector>

namespace mlir::trellis {
#define GEN_PASS_DEF_TRELLISAPPLYFP8SCALES
#include "dialect/Passes.h.inc"
} // namespace mlir::trellis

using namespace mlir;
using namespace mlir::trellis;

namespace {

constexpr llvm::StringLiteral kFormat = "trellis-fp8-activation-scales";

/// What a calibration file holds: each FP8 linear's input amax, and (files
/// of programs with FP8 attention, when present) each FP8 attention's
/// per-head v amax.
struct Scales {
  std::map<std::string, double> amax;
  std::optional<std::map<std::string, std::vector<float>>> vAmax;
};

/// A positive finite f32, as the file's numbers must be.
bool positiveF32(std::optional<double> v) {
  return v && std::isfinite(*v) && *v > 0 && std::isfinite(float(*v)) &&
         float(*v) > 0;
}

/// The scales of a calibration file, or an error naming the file.
FailureOr<Scales> readScales(ModuleOp module, StringRef path) {
  auto fail = [&](const Twine &why) {
    module.emitError() << "FP8 scales file '" << path << "': " << why;
    return failure();
  };
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fail("cannot read it: " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    return fail("not valid JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return fail("expected a JSON object at the top");
  std::optional<StringRef> format = root->getString("format");
  if (!format || *format != kFormat)
    return fail(Twine("\"format\" must be \"") + kFormat + "\", found " +
                (format ? Twine("\"") + *format + "\"" : Twine("none")));
  std::optional<int64_t> version = root->getInteger("version");
  if (version != 1)
    return fail(Twine("\"version\" must be 1, found ") +
                (version ? Twine(*version) : Twine("none")));
  const llvm::json::Object *amax = root->getObject("amax");
  if (!amax)
    return fail("expected an object \"amax\" (weight -> largest |input|)");
  Scales scales;
  for (const auto &[key, value] : *amax) {
    std::optional<double> v = value.getAsNumber();
    if (!positiveF32(v))
      return fail("\"amax\"[\"" + key.str() +
                  "\"] must be a positive finite number (an f32)");
    scales.amax[key.str()] = *v;
  }
  if (const llvm::json::Value *vAmax = root->get("v_amax")) {
    const llvm::json::Object *heads = vAmax->getAsObject();
    if (!heads)
      return fail("\"v_amax\" must be an object (q_gamma weight -> the "
                  "largest |v| of each head)");
    scales.vAmax.emplace();
    for (const auto &[key, value] : *heads) {
      const llvm::json::Array *list = value.getAsArray();
      std::vector<float> values;
      for (size_t i = 0; list && i < list->size(); ++i) {
        std::optional<double> v = (*list)[i].getAsNumber();
        if (!positiveF32(v))
          break;
        values.push_back(float(*v));
      }
      if (!list || list->empty() || values.size() != list->size())
        return fail("\"v_amax\"[\"" + key.str() +
                    "\"] must be a non-empty array of positive finite "
                    "numbers (f32), one per head");
      (*scales.vAmax)[key.str()] = std::move(values);
    }
  }
  return scales;
}

/// "<model>/<name>" of the trellis.weight defining `v`, or "".
std::string weightKey(Value v) {
  auto weight = v ? v.getDefiningOp<WeightOp>() : WeightOp();
  return weight ? (weight.getModel() + "/" + weight.getName()).str()
                : std::string();
}

struct ApplyFp8ScalesPass
    : trellis::impl::TrellisApplyFp8ScalesBase<ApplyFp8ScalesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (scalesFile.empty()) {
      module.emitError() << "trellis-apply-fp8-scales needs scales-file";
      return signalPassFailure();
    }
    FailureOr<Scales> scales = readScales(module, scalesFile);
    if (failed(scales))
      return signalPassFailure();
    std::set<std::string> used, usedAttention;
    bool failedAny = false;
    module.walk([&](LinearOp op) {
      if (op.getPrecision() != StringRef("fp8_e4m3"))
        return;
      std::string key = weightKey(op.getWeight());
      if (key.empty()) {
        op.emitError() << "an FP8 linear whose weight is not a trellis.weight "
                          "has no calibration key";
        failedAny = true;
        return;
      }
      auto it = scales->amax.find(key);
      if (it == scales->amax.end()) {
        op.emitError() << "FP8 scales file '" << scalesFile
                       << "' has no entry for '" << key
                       << "' (calibrated for another program?)";
        failedAny = true;
        return;
      }
      used.insert(key);
      op.setActivationAmaxAttr(
          FloatAttr::get(Float32Type::get(op.getContext()), it->second));
    });
    // The FP8 attention ops' v scales: static where the file has them (a
    // file without "v_amax" leaves the attention's amax pass in place).
    if (scales->vAmax)
      module.walk([&](Operation *op) {
        if (!isa<AttentionOp, SparseAttentionOp>(op))
          return;
        auto precision = op->getAttrOfType<StringAttr>("precision");
        if (!precision || precision.getValue() != "fp8_e4m3")
          return;
        Value qGamma = isa<AttentionOp>(op)
                           ? cast<AttentionOp>(op).getQGamma()
                           : cast<SparseAttentionOp>(op).getQGamma();
        std::string key = weightKey(qGamma);
        auto it = scales->vAmax->find(key);
        if (key.empty() || it == scales->vAmax->end()) {
          op->emitError() << "FP8 scales file '" << scalesFile
                          << "' has no \"v_amax\" entry for the attention "
                             "whose q_gamma is '"
                          << (key.empty() ? "not a weight" : key)
                          << "' (calibrated for another program?)";
          failedAny = true;
          return;
        }
        usedAttention.insert(key);
        op->setAttr("v_amax",
                    DenseF32ArrayAttr::get(op->getContext(), it->second));
        if (failed(verify(op))) // e.g. a head count that differs
          failedAny = true;
      });
    if (failedAny)
      return signalPassFailure();
    auto unused = [&](const auto &map, const std::set<std::string> &read,
                      const char *what) {
      for (const auto &[key, value] : map)
        if (!read.count(key)) {
          module.emitError()
              << "FP8 scales file '" << scalesFile << "': no FP8 " << what
              << " of this program reads '" << key
              << "' (calibrated for another program?)";
          return true;
        }
      return false;
    };
    if (unused(scales->amax, used, "linear") ||
        (scales->vAmax &&
         unused(*scales->vAmax, usedAttention, "attention (\"v_amax\")")))
      return signalPassFailure();
  }
};

} // namespace
