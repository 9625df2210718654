//===- ShareGuidancePrefix.cpp - One prefix for both guidance branches ----===//
//
// On a guided step the two regions of a specialized trellis.flow_sample get
// the same x and τ; everything they compute before the condition enters (the
// SLat flow's input blocks, the first transformer block's self-attention,
// the time-table rows) is the same computation twice. This pass matches the
// unconditional region's ops against the conditional region's (same op,
// attributes and result types, operands that are the same values from above
// or already matched values), moves the matched ops of region 0 into the
// op's `shared` region, and passes the values the branches still use to
// both as block arguments (yielded by trellis.shared_yield). Exact: the
// branches read the very values they computed before.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::trellis {
#define GEN_PASS_DEF_TRELLISSHAREGUIDANCEPREFIX
#include "dialect/Passes.h.inc"
} // namespace mlir::trellis

using namespace mlir;
using namespace mlir::trellis;

namespace {

/// Ops that cost nothing at run time (views, the time-table row lookups):
/// a prefix of only these is not worth a region of its own.
bool isFree(Operation *op) { return isa<ReshapeOp, SplitOp, TimeRowOp>(op); }

/// The ops of `uncond` that compute what an op of `cond` computes, as a map
/// from each uncond value to its cond counterpart (block arguments x and τ
/// included). Values from above map to themselves.
struct PrefixMatch {
  DenseMap<Value, Value> counterpart;
  SmallVector<Operation *> uncondOps;   // matched, in order
  llvm::SetVector<Operation *> condOps; // their counterparts, in order
};

PrefixMatch matchPrefix(FlowSampleOp op, Block &cond, Block &uncond) {
  PrefixMatch m;
  for (unsigned i = 0; i < 2; ++i)
    m.counterpart[uncond.getArgument(i)] = cond.getArgument(i);
  auto mapped = [&](Value v) -> Value {
    if (auto it = m.counterpart.find(v); it != m.counterpart.end())
      return it->second;
    // From above the sampler: the same value in both regions.
    if (!op->isAncestor(v.getParentRegion()->getParentOp()))
      return v;
    return {};
  };
  for (Operation &u : uncond.without_terminator()) {
    if (u.getNumRegions() || !isMemoryEffectFree(&u))
      continue;
    SmallVector<Value> operands;
    for (Value v : u.getOperands()) {
      Value c = mapped(v);
      if (!c)
        break;
      operands.push_back(c);
    }
    if (operands.size() != u.getNumOperands())
      continue;
    // Candidates: the users in region 0 of the first mapped operand (every
    // op of the region when there is no operand).
    SmallVector<Operation *> candidates;
    if (operands.empty()) {
      for (Operation &c : cond.without_terminator())
        candidates.push_back(&c);
    } else {
      for (Operation *user : operands.front().getUsers())
        if (user->getBlock() == &cond)
          candidates.push_back(user);
    }
    for (Operation *c : candidates) {
      if (c == cond.getTerminator() || c->getNumOperands() != operands.size())
        continue;
      // (Called only for operands that differ: values from above match.)
      bool same = OperationEquivalence::isEquivalentTo(
          c, &u,
          [&](Value lhs, Value rhs) { return success(lhs == mapped(rhs)); },
          /*markEquivalent=*/nullptr, OperationEquivalence::IgnoreLocations);
      if (!same)
        continue;
      for (auto [uv, cv] : llvm::zip(u.getResults(), c->getResults()))
        m.counterpart[uv] = cv;
      m.uncondOps.push_back(&u);
      m.condOps.insert(c);
      break;
    }
  }
  return m;
}

/// Region 0's shared ops in region 0's order.
SmallVector<Operation *> inBlockOrder(Block &block,
                                      const llvm::SetVector<Operation *> &ops) {
  SmallVector<Operation *> ordered;
  for (Operation &op : block)
    if (ops.contains(&op))
      ordered.push_back(&op);
  return ordered;
}

void sharePrefix(FlowSampleOp op) {
  Block &cond = op.getBody().front(), &uncond = op.getUncondBody().front();
  PrefixMatch m = matchPrefix(op, cond, uncond);
  if (llvm::all_of(m.condOps, isFree))
    return;
  SmallVector<Operation *> shared = inBlockOrder(cond, m.condOps);
  llvm::DenseSet<Operation *> sharedSet(shared.begin(), shared.end());
  llvm::DenseSet<Operation *> uncondSet(m.uncondOps.begin(), m.uncondOps.end());

  // The values the branches still read: a shared result with a use outside
  // the shared ops in region 0, or whose uncond counterpart has one in
  // region 1.
  llvm::SetVector<Value> yielded;
  for (Operation *c : shared)
    for (Value v : c->getResults())
      if (llvm::any_of(v.getUsers(), [&](Operation *user) {
            return !sharedSet.contains(user);
          }))
        yielded.insert(v);
  for (Operation *u : m.uncondOps)
    for (Value v : u->getResults())
      if (llvm::any_of(v.getUsers(), [&](Operation *user) {
            return !uncondSet.contains(user);
          }))
        yielded.insert(m.counterpart.lookup(v));
  // Keep region 0's order of definition.
  SmallVector<Value> values;
  for (Operation *c : shared)
    for (Value v : c->getResults())
      if (yielded.contains(v))
        values.push_back(v);

  // The shared region: (x, τ) like the others, region 0's ops moved in.
  Block *block = new Block();
  op.getSharedBody().push_back(block);
  Location loc = op.getLoc();
  for (unsigned i = 0; i < 2; ++i)
    block->addArgument(cond.getArgument(i).getType(), loc);
  for (Operation *c : shared) {
    c->moveBefore(block, block->end());
    for (unsigned i = 0; i < 2; ++i)
      cond.getArgument(i).replaceUsesWithIf(
          block->getArgument(i),
          [&](OpOperand &use) { return use.getOwner() == c; });
  }
  OpBuilder builder = OpBuilder::atBlockEnd(block);
  SharedYieldOp::create(builder, loc, values);

  // The branches read the shared values through new arguments.
  DenseMap<Value, BlockArgument> uncondArgs;
  for (Value v : values) {
    BlockArgument condArg = cond.addArgument(v.getType(), v.getLoc());
    uncondArgs[v] = uncond.addArgument(v.getType(), v.getLoc());
    v.replaceUsesWithIf(condArg, [&](OpOperand &use) {
      return cond.getParent()->isAncestor(use.getOwner()->getParentRegion());
    });
  }
  for (Operation *u : m.uncondOps)
    for (Value uv : u->getResults())
      if (auto arg = uncondArgs.find(m.counterpart.lookup(uv));
          arg != uncondArgs.end())
        uv.replaceAllUsesWith(arg->second);
  for (Operation *u : llvm::reverse(m.uncondOps))
    u->erase();
}

struct ShareGuidancePrefix
    : trellis::impl::TrellisShareGuidancePrefixBase<ShareGuidancePrefix> {
  using TrellisShareGuidancePrefixBase::TrellisShareGuidancePrefixBase;
  void runOnOperation() override {
    SmallVector<FlowSampleOp> samplers;
    getOperation().walk([&](FlowSampleOp op) {
      if (op.isSpecialized() && !op.hasSharedPrefix())
        samplers.push_back(op);
    });
    for (FlowSampleOp op : samplers)
      sharePrefix(op);
  }
};

} // namespace
