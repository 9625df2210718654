//===- HoistTime.cpp - Time tables out of the sampler loop ----------------===//
//
// What a flow_sample body computes from τ alone (the timestep embedding, the
// adaLN modulation of every block) takes only `steps` distinct values: the
// time grid is static. This pass computes it once for the whole grid above
// the op (the τ-only slice cloned with τ replaced by the [steps] grid: the
// ops are row-wise over dimension 0) and selects the step's row inside the
// body with trellis.time_row.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::trellis {
#define GEN_PASS_DEF_TRELLISHOISTTIME
#include "dialect/Passes.h.inc"
} // namespace mlir::trellis

using namespace mlir;
using namespace mlir::trellis;

namespace {

/// `type` with dimension 0 of size `rows` (its encoding kept).
RankedTensorType withRows(RankedTensorType type, int64_t rows) {
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = rows;
  return RankedTensorType::get(shape, type.getElementType(),
                               type.getEncoding());
}

/// A static tensor whose dimension 0 is the model batch `batch`.
bool hasBatchRows(Type type, int64_t batch) {
  auto t = dyn_cast<RankedTensorType>(type);
  return t && t.hasStaticShape() && t.getRank() >= 1 &&
         t.getDimSize(0) == batch;
}

/// Whether `op` computes each row of its results (dimension 0) from the
/// same row of its operands in `slice` and from whole values defined above
/// the sampler: then running it on [steps] rows instead of [B] computes the
/// result of every step at once.
bool isRowWise(Operation *op, const llvm::SetVector<Value> &slice,
               int64_t batch) {
  if (op->getNumRegions() != 0 || op->getNumResults() == 0)
    return false;
  for (Type t : op->getResultTypes())
    if (!hasBatchRows(t, batch))
      return false;
  auto inSlice = [&](Value v) { return slice.contains(v); };
  if (isa<TimestepEmbeddingOp, CastOp, SiluOp, GeluOp, SigmoidOp, TanhOp,
          SoftplusOp, AtanhOp, ExpOp, LogOp, SinOp, CosOp, NegOp, SqrtOp,
          AbsOp>(op))
    return inSlice(op->getOperand(0));
  if (auto linear = dyn_cast<LinearOp>(op))
    return inSlice(linear.getInput()) && !inSlice(linear.getWeight()) &&
           !linear.getResidual() &&
           !(linear.getBias() && inSlice(linear.getBias())) &&
           linear.getInput().getType().getRank() >= 2;
  if (auto split = dyn_cast<SplitOp>(op)) {
    auto rank = split.getInput().getType().getRank();
    int64_t axis = split.getAxisAttr().getInt();
    axis = axis < 0 ? axis + rank : axis;
    return inSlice(split.getInput()) && axis >= 1;
  }
  if (auto concat = dyn_cast<ConcatOp>(op)) {
    auto rank = cast<RankedTensorType>(concat.getType()).getRank();
    int64_t axis = concat.getAxisAttr().getInt();
    axis = axis < 0 ? axis + rank : axis;
    return axis >= 1 && llvm::all_of(concat.getInputs(), inSlice);
  }
  if (auto reshape = dyn_cast<ReshapeOp>(op))
    return inSlice(reshape.getInput());
  if (isa<AddOp, SubOp, MulOp, DivOp, MaximumOp>(op)) {
    // Operands from the slice are full [B, ...] tensors; operands from above
    // broadcast over dimension 0 (lower rank), so they apply to every row.
    auto rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
    bool any = false;
    for (Value v : op->getOperands()) {
      auto t = cast<RankedTensorType>(v.getType());
      if (inSlice(v)) {
        any = true;
        if (t.getRank() != rank)
          return false;
      } else if (t.getRank() >= rank) {
        return false;
      }
    }
    return any;
  }
  return false;
}

/// Hoists the τ-only slice of one sampler region; `grid` is created on first
/// use (one per sampler).
void hoistRegion(FlowSampleOp sampler, Region &region, Value &grid,
                 int64_t maxSteps) {
  if (region.empty())
    return;
  Block &block = region.front();
  if (block.getNumArguments() < 2)
    return;
  Value tau = block.getArgument(1);
  auto tauType = dyn_cast<RankedTensorType>(tau.getType());
  if (!tauType || tauType.getRank() != 1 || !tauType.hasStaticShape())
    return;
  int64_t batch = tauType.getDimSize(0);
  // The tables' rows: the compiled steps, or more so that a run-time steps
  // override up to maxSteps still finds its rows.
  int64_t steps = std::max<int64_t>(sampler.getSteps(), maxSteps);

  // The slice: ops computed from τ, other slice values and values defined
  // above the sampler only.
  auto definedAbove = [&](Value v) {
    return !sampler->isAncestor(v.getParentRegion()->getParentOp());
  };
  llvm::SetVector<Value> slice;
  slice.insert(tau);
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator()) {
    bool operandsOk = llvm::all_of(op.getOperands(), [&](Value v) {
      return slice.contains(v) || definedAbove(v);
    });
    if (!operandsOk || op.getNumOperands() == 0 ||
        !isRowWise(&op, slice, batch))
      continue;
    ops.push_back(&op);
    slice.insert(op.result_begin(), op.result_end());
  }
  llvm::DenseSet<Operation *> inSlice(ops.begin(), ops.end());
  // Views of τ (reshapes, splits) cost nothing in the body: they stay there
  // rather than becoming tables.
  llvm::DenseSet<Value> viewsOfTau{tau};
  for (Operation *op : ops)
    if (isa<ReshapeOp, SplitOp>(op) && viewsOfTau.contains(op->getOperand(0)))
      viewsOfTau.insert(op->result_begin(), op->result_end());
  // The slice values the rest of the body uses (in definition order).
  SmallVector<Value> escaping;
  for (Operation *op : ops)
    for (Value r : op->getResults())
      if (!viewsOfTau.contains(r) &&
          llvm::any_of(r.getUsers(),
                       [&](Operation *u) { return !inSlice.contains(u); }))
        escaping.push_back(r);
  if (escaping.empty())
    return;

  OpBuilder above(sampler);
  Location loc = sampler.getLoc();
  if (!grid)
    grid = TimeGridOp::create(
        above, loc, RankedTensorType::get({steps}, above.getF32Type()),
        sampler.getStepsAttr(), sampler.getRescaleTAttr());
  // The slice over the whole grid: the same ops on [steps] rows (those the
  // escaping values need).
  llvm::DenseSet<Operation *> needed;
  for (Value v : escaping)
    needed.insert(v.getDefiningOp());
  for (Operation *op : llvm::reverse(ops))
    if (needed.contains(op))
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp(); def && inSlice.count(def))
          needed.insert(def);
  IRMapping mapping;
  mapping.map(tau, grid);
  for (Operation *op : ops) {
    if (!needed.contains(op))
      continue;
    Operation *copy = above.clone(*op, mapping);
    for (Value r : copy->getResults())
      r.setType(withRows(cast<RankedTensorType>(r.getType()), steps));
  }

  // One table per element type: the escaping values as [steps, W] columns,
  // one time_row in the body, split back into the values' columns.
  llvm::MapVector<Type, SmallVector<Value>> groups;
  for (Value v : escaping)
    groups[getElementTypeOrSelf(v.getType())].push_back(v);
  OpBuilder inside = OpBuilder::atBlockBegin(&block);
  for (auto &[elementType, values] : groups) {
    SmallVector<Value> columns;
    SmallVector<int64_t> widths;
    for (Value v : values) {
      Value h = mapping.lookup(v);
      auto t = cast<RankedTensorType>(h.getType());
      int64_t width = t.getNumElements() / steps;
      if (t.getRank() != 2)
        h = ReshapeOp::create(
            above, h.getLoc(),
            RankedTensorType::get({steps, width}, elementType), h);
      columns.push_back(h);
      widths.push_back(width);
    }
    int64_t total = 0;
    for (int64_t w : widths)
      total += w;
    Value table = columns.front();
    if (columns.size() > 1)
      table = ConcatOp::create(
          above, loc, RankedTensorType::get({steps, total}, elementType),
          columns, /*axis=*/1);
    Value row = TimeRowOp::create(
        inside, loc, RankedTensorType::get({batch, total}, elementType), table,
        grid, tau);
    SmallVector<Value> pieces{row};
    if (values.size() > 1) {
      SmallVector<Type> types;
      for (int64_t w : widths)
        types.push_back(RankedTensorType::get({batch, w}, elementType));
      auto split = SplitOp::create(inside, loc, types, row, /*axis=*/1, widths);
      pieces.assign(split->result_begin(), split->result_end());
    }
    for (auto [v, piece] : llvm::zip_equal(values, pieces)) {
      Value replacement = piece;
      if (piece.getType() != v.getType())
        replacement = ReshapeOp::create(inside, v.getLoc(), v.getType(), piece);
      v.replaceUsesWithIf(replacement, [&](OpOperand &use) {
        return !inSlice.contains(use.getOwner());
      });
    }
  }
  // What the body no longer uses (all but views of τ it still uses).
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty())
      op->erase();
}

struct HoistTimePass
    : public mlir::trellis::impl::TrellisHoistTimeBase<HoistTimePass> {
  using TrellisHoistTimeBase::TrellisHoistTimeBase;
  void runOnOperation() override {
    getOperation().walk([&](FlowSampleOp sampler) {
      Value grid;
      for (Region &region : sampler->getRegions())
        hoistRegion(sampler, region, grid, maxSteps);
    });
  }
};

} // namespace
