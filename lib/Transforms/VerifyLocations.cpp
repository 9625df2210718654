//===- VerifyLocations.cpp - Reject ops without a source location ---------===//
//
// DESIGN.md §4: every op carries where it came from, and every pass keeps or
// fuses locations. This pass is the check.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

namespace mlir::trellis {
#define GEN_PASS_DEF_TRELLISVERIFYLOCATIONS
#include "dialect/Passes.h.inc"
} // namespace mlir::trellis

using namespace mlir;

namespace {

/// True if `loc` says nothing about where the op came from.
bool isUnknown(Location loc) {
  if (isa<UnknownLoc>(loc))
    return true;
  if (auto fused = dyn_cast<FusedLoc>(loc))
    return llvm::all_of(fused.getLocations(),
                        [](Location l) { return isUnknown(l); });
  return false;
}

struct VerifyLocationsPass
    : trellis::impl::TrellisVerifyLocationsBase<VerifyLocationsPass> {
  void runOnOperation() override {
    bool failedAny = false;
    getOperation()->walk([&](Operation *op) {
      if (isa<ModuleOp>(op) || !isUnknown(op->getLoc()))
        return;
      failedAny = true;
      // Point the diagnostic at the nearest parent that has a location.
      Operation *parent = op->getParentOp();
      while (parent && isUnknown(parent->getLoc()))
        parent = parent->getParentOp();
      InFlightDiagnostic diag =
          (parent ? parent->emitError() : op->emitError())
          << "operation '" << op->getName()
          << "' has no source location (every op must name its origin)";
    });
    if (failedAny)
      signalPassFailure();
  }
};

} // namespace
