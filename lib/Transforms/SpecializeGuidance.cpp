//===- SpecializeGuidance.cpp - Two-region trellis.flow_sample ------------===//
//
// Inlines the velocity model of a flow_sample twice, once per guidance branch,
// so that each branch uses its condition from above: what depends on the
// condition alone is then loop invariant (the op is LoopLike) and
// loop-invariant-code-motion hoists it out of the sampler loop.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::trellis {
#define GEN_PASS_DEF_TRELLISSPECIALIZEGUIDANCE
#include "dialect/Passes.h.inc"
} // namespace mlir::trellis

using namespace mlir;
using namespace mlir::trellis;

namespace {

/// Clones the body of `callee` before `builder`'s insertion point with its
/// arguments bound to `args`; returns the values it returns. The cloned ops
/// keep the callee's locations (the model's module paths).
SmallVector<Value> inlineBody(OpBuilder &builder, func::FuncOp callee,
                              ValueRange args) {
  IRMapping mapping;
  Block &entry = callee.getBody().front();
  mapping.map(entry.getArguments(), args);
  for (Operation &op : entry.without_terminator())
    builder.clone(op, mapping);
  SmallVector<Value> results;
  for (Value v : entry.getTerminator()->getOperands())
    results.push_back(mapping.lookupOrDefault(v));
  return results;
}

/// The velocity-model call of a one-region flow_sample body, or null when the
/// op is not in the form this pass specializes.
func::CallOp specializableCall(FlowSampleOp op, SymbolTable &symbols) {
  if (op.isSpecialized() || op.getMultiImage() != MultiImageMode::none)
    return nullptr;
  Block &body = op.getBody().front();
  if (body.getNumArguments() != 3 || !llvm::hasNItems(body, 2))
    return nullptr;
  auto call = dyn_cast<func::CallOp>(body.front());
  auto yield = dyn_cast<YieldOp>(body.back());
  if (!call || !yield || call.getNumResults() != 1 ||
      yield.getValue() != call.getResult(0))
    return nullptr;
  // Conditions of the body's type, or of batch 1 (repeated to B above the
  // op, as the sampler does per call).
  auto c = cast<RankedTensorType>(body.getArgument(2).getType());
  for (Value cond : {op.getCond(), op.getNegCond()}) {
    auto t = cast<RankedTensorType>(cond.getType());
    if (t != c && (t.getDimSize(0) != 1 ||
                   t.getShape().drop_front() != c.getShape().drop_front() ||
                   t.getElementType() != c.getElementType()))
      return nullptr;
  }
  auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
  if (!callee || callee.isExternal() || !callee.getBody().hasOneBlock())
    return nullptr;
  return call;
}

struct SpecializeGuidancePass
    : trellis::impl::TrellisSpecializeGuidanceBase<SpecializeGuidancePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<FlowSampleOp> samplers;
    module.walk([&](FlowSampleOp op) { samplers.push_back(op); });
    llvm::SetVector<func::FuncOp> inlined;
    for (FlowSampleOp op : samplers) {
      func::CallOp call = specializableCall(op, symbols);
      if (!call)
        continue;
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      Block &body = op.getBody().front();
      auto yield = cast<YieldOp>(body.back());
      // The conditions as the body sees them: [B, Lc, Cc].
      OpBuilder builder(op);
      Type cType = body.getArgument(2).getType();
      auto repeated = [&](Value cond) -> Value {
        if (cond.getType() == cType)
          return cond;
        return BroadcastRowsOp::create(builder, op.getLoc(), cType, cond);
      };
      Value cond = repeated(op.getCond()), negCond = repeated(op.getNegCond());
      // The call's operands with the body's condition argument replaced.
      auto operandsWith = [&](ValueRange regionArgs, Value condition) {
        SmallVector<Value> args;
        for (Value v : call.getOperands()) {
          if (v == body.getArgument(0))
            args.push_back(regionArgs[0]);
          else if (v == body.getArgument(1))
            args.push_back(regionArgs[1]);
          else if (v == body.getArgument(2))
            args.push_back(condition);
          else
            args.push_back(v); // used from above (e.g. the SLat coordinates)
        }
        return args;
      };

      // Region 1: the unconditional velocity.
      Block *uncond = new Block();
      op.getUncondBody().push_back(uncond);
      for (unsigned i = 0; i < 2; ++i)
        uncond->addArgument(body.getArgument(i).getType(),
                            body.getArgument(i).getLoc());
      builder.setInsertionPointToStart(uncond);
      SmallVector<Value> vu = inlineBody(
          builder, callee, operandsWith(uncond->getArguments(), negCond));
      YieldOp::create(builder, yield.getLoc(), vu.front());

      // Region 0: the conditional velocity, in place of the call.
      builder.setInsertionPoint(call);
      SmallVector<Value> vc =
          inlineBody(builder, callee,
                     operandsWith(body.getArguments().take_front(2), cond));
      call.getResult(0).replaceAllUsesWith(vc.front());
      call.erase();
      body.eraseArgument(2);
      inlined.insert(callee);
    }
    // A private velocity model that nothing calls any more would only be
    // compiled for nothing (a public one is an entry of the program).
    for (func::FuncOp fn : inlined)
      if (fn.isPrivate() && SymbolTable::symbolKnownUseEmpty(fn, module))
        fn.erase();
  }
};

} // namespace
