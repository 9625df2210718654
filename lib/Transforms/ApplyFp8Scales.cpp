//===- ApplyFp8Scales.cpp - Static FP8 activation scales ------------------===//
//
// An FP8 linear with a dynamic scale pays a pass over its input (the amax)
// before every GEMM; a static scale, the largest |x| a calibration run saw
// (trellis.exe --calibrate), removes it. This pass reads the calibration
// file and sets each FP8 linear's activation_amax. The key of a linear is
// its weight's "<model>/<name>", the same rule as the runtime's calibration
// (runtime/program/Fp8Scales.cpp), so a file outlives recompiles of the same
// models. Part of the graph phase, when trellisc --fp8-scales names a file.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <map>
#include <set>

namespace mlir::trellis {
#define GEN_PASS_DEF_TRELLISAPPLYFP8SCALES
#include "dialect/Passes.h.inc"
} // namespace mlir::trellis

using namespace mlir;
using namespace mlir::trellis;

namespace {

constexpr llvm::StringLiteral kFormat = "trellis-fp8-activation-scales";

/// The "amax" map of a calibration file, or an error naming the file.
FailureOr<std::map<std::string, double>> readScales(ModuleOp module,
                                                    StringRef path) {
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
  std::map<std::string, double> scales;
  for (const auto &[key, value] : *amax) {
    std::optional<double> v = value.getAsNumber();
    if (!v || !std::isfinite(*v) || *v <= 0 || !std::isfinite(float(*v)) ||
        float(*v) <= 0)
      return fail("\"amax\"[\"" + key.str() +
                  "\"] must be a positive finite number (an f32)");
    scales[key.str()] = *v;
  }
  return scales;
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
    FailureOr<std::map<std::string, double>> scales =
        readScales(module, scalesFile);
    if (failed(scales))
      return signalPassFailure();
    std::set<std::string> used;
    bool failedAny = false;
    module.walk([&](LinearOp op) {
      if (op.getPrecision() != StringRef("fp8_e4m3"))
        return;
      auto weight = op.getWeight().getDefiningOp<WeightOp>();
      if (!weight) {
        op.emitError() << "an FP8 linear whose weight is not a trellis.weight "
                          "has no calibration key";
        failedAny = true;
        return;
      }
      std::string key = (weight.getModel() + "/" + weight.getName()).str();
      auto it = scales->find(key);
      if (it == scales->end()) {
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
    if (failedAny)
      return signalPassFailure();
    for (const auto &[key, value] : *scales)
      if (!used.count(key)) {
        module.emitError() << "FP8 scales file '" << scalesFile
                           << "': no FP8 linear of this program reads '" << key
                           << "' (calibrated for another program?)";
        return signalPassFailure();
      }
  }
};

} // namespace
