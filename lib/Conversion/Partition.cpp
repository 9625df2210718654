//===- Partition.cpp - Split the module between the GPU and the host ------===//
#include "trellis/Conversion/Partition.h"

#include "dialect/BackendPasses.h"
#include "dialect/TrellisOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/ADT/SetVector.h"

#include <map>

namespace mlir::trellis {
#define GEN_PASS_DEF_TRELLISPARTITIONCUDA
#include "dialect/BackendPasses.h.inc"
} // namespace mlir::trellis

using namespace mlir;

namespace trellis {

namespace {

/// conv3d(x, w, b) -> add(conv3d(x, w), reshape(b -> [Cout, 1, 1, 1])).
void splitConvBias(func::FuncOp fn) {
  SmallVector<mlir::trellis::Conv3dOp> convs;
  fn.walk([&](mlir::trellis::Conv3dOp op) {
    if (op.getBias())
      convs.push_back(op);
  });
  for (mlir::trellis::Conv3dOp op : convs) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    auto resultType = cast<RankedTensorType>(op.getType());
    auto conv = mlir::trellis::Conv3dOp::create(b, loc, resultType,
                                                op.getInput(), op.getWeight(),
                                                Value(), op.getPaddingAttr());
    auto biasType = cast<RankedTensorType>(op.getBias().getType());
    auto column = RankedTensorType::get({biasType.getDimSize(0), 1, 1, 1},
                                        biasType.getElementType());
    auto reshaped =
        mlir::trellis::ReshapeOp::create(b, loc, column, op.getBias());
    auto add = mlir::trellis::AddOp::create(b, loc, resultType,
                                            conv.getResult(), reshaped);
    op.getResult().replaceAllUsesWith(add.getResult());
    op.erase();
  }
}

/// Where an op computed from `operands` alone goes: right after the last of
/// their definitions when they all live in `fn`'s entry block (so that the
/// resampling ops of every sampler step share one index), else at `user`.
void setInsertionAfterOperands(OpBuilder &b, func::FuncOp fn,
                               ArrayRef<Value> operands, Operation *user) {
  Block &entry = fn.getBody().front();
  Operation *last = nullptr;
  for (Value v : operands) {
    if (v.getParentBlock() != &entry) {
      b.setInsertionPoint(user);
      return;
    }
    Operation *def = v.getDefiningOp();
    if (def && (!last || last->isBeforeInBlock(def)))
      last = def;
  }
  if (last)
    b.setInsertionPointAfter(last);
  else
    b.setInsertionPointToStart(&entry);
}

/// The sparse resampling ops as an index computed from the coordinates (a
/// host op, evaluated when the runtime binds the voxel set, one per
/// coordinate pair) and a generated kernel over it:
///   upsample(f, coarse, fine)  -> gather_rows(f, parent_rows(fine, coarse))
///   batch_broadcast(v, coords) -> gather_rows(v, batch_index(coords))
///   downsample(f, fine, coarse)
///     -> segment_mean(f, child_rows(fine, coarse)) {extra_count = 1}
/// (Σ children / (n + 1), spec §6.3's quirk).
void lowerSparseResampling(func::FuncOp fn) {
  using namespace mlir::trellis;
  SmallVector<Operation *> ops;
  fn.walk([&](Operation *op) {
    if (isa<SparseUpsampleOp, SparseDownsampleOp, SparseBatchBroadcastOp>(op))
      ops.push_back(op);
  });
  // One index op per (kind, coordinate operands).
  std::map<std::vector<const void *>, Operation *> indexOps;
  enum IndexKind : uintptr_t { Parents, Batch, Children };
  auto indexOp = [&](IndexKind kind, SmallVector<Value, 2> coords,
                     Operation *user, auto build) -> Operation * {
    std::vector<const void *> key = {reinterpret_cast<const void *>(kind)};
    for (Value v : coords)
      key.push_back(v.getAsOpaquePointer());
    Operation *&op = indexOps[key];
    if (!op) {
      OpBuilder b(user);
      setInsertionAfterOperands(b, fn, coords, user);
      op = build(b);
    }
    return op;
  };
  for (Operation *op : ops) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    Value result;
    if (auto up = dyn_cast<SparseUpsampleOp>(op)) {
      Operation *parents = indexOp(
          Parents, {up.getFine(), up.getCoarse()}, op, [&](OpBuilder &ib) {
            return SparseParentRowsOp::create(ib, loc, up.getFine(),
                                              up.getCoarse())
                .getOperation();
          });
      result =
          GatherRowsOp::create(b, loc, up.getFeats(), parents->getResult(0));
    } else if (auto bc = dyn_cast<SparseBatchBroadcastOp>(op)) {
      Operation *batch =
          indexOp(Batch, {bc.getCoords()}, op, [&](OpBuilder &ib) {
            return SparseBatchIndexOp::create(ib, loc, bc.getCoords())
                .getOperation();
          });
      result =
          GatherRowsOp::create(b, loc, bc.getValues(), batch->getResult(0));
    } else {
      auto down = cast<SparseDownsampleOp>(op);
      Operation *csr = indexOp(
          Children, {down.getFine(), down.getCoarse()}, op, [&](OpBuilder &ib) {
            return SparseChildRowsOp::create(ib, loc, down.getFine(),
                                             down.getCoarse())
                .getOperation();
          });
      result = SegmentMeanOp::create(b, loc, down.getFeats(), csr->getResult(0),
                                     csr->getResult(1),
                                     /*extra_count=*/1);
    }
    op->getResult(0).replaceAllUsesWith(result);
    op->erase();
  }
}

/// The attention kernels take fp16 (runtime/kernels/attention.h): an f32
/// `trellis.attention` (the image-conditioning model's) runs on fp16 copies
/// of q, k, v and its result is widened back to f32. Scores, softmax and
/// accumulation stay f32 in the kernel; only the operands are rounded.
void narrowF32Attention(func::FuncOp fn) {
  SmallVector<mlir::trellis::AttentionOp> ops;
  fn.walk([&](mlir::trellis::AttentionOp op) {
    if (cast<RankedTensorType>(op.getQ().getType()).getElementType().isF32())
      ops.push_back(op);
  });
  for (mlir::trellis::AttentionOp op : ops) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    auto narrow = [&](Value v) -> Value {
      auto type = cast<RankedTensorType>(v.getType());
      return mlir::trellis::CastOp::create(b, loc, type.clone(b.getF16Type()),
                                           v);
    };
    auto resultType = cast<RankedTensorType>(op.getType());
    auto half = mlir::trellis::AttentionOp::create(
        b, loc, resultType.clone(b.getF16Type()), narrow(op.getQ()),
        narrow(op.getK()), narrow(op.getV()), op.getQGamma(), op.getKGamma(),
        op.getScaleAttr(), op.getTilesAttr(), op.getPrecisionAttr(),
        op.getVAmaxAttr());
    auto wide =
        mlir::trellis::CastOp::create(b, loc, resultType, half.getResult());
    op.getResult().replaceAllUsesWith(wide.getResult());
    op.erase();
  }
}

/// The GPU backend's shapes: a tensor may be dynamic in dimension 0 only
/// (the voxel rows, docs/design/gpu-backend.md "Sparse stages").
LogicalResult checkDynamicDims(func::FuncOp fn) {
  auto bad = [](Type t) {
    auto rt = dyn_cast<RankedTensorType>(t);
    if (!rt)
      return false;
    for (int64_t d = 1; d < rt.getRank(); ++d)
      if (rt.isDynamicDim(d))
        return true;
    return false;
  };
  for (BlockArgument a : fn.getArguments())
    if (bad(a.getType()))
      return emitError(a.getLoc()) << "cannot run on the GPU: argument type "
                                   << a.getType() << " of @" << fn.getSymName()
                                   << " is dynamic in a dimension other than 0";
  WalkResult walked = fn.walk([&](Operation *op) {
    SmallVector<Type> types = llvm::to_vector(op->getOperandTypes());
    llvm::append_range(types, op->getResultTypes());
    for (Type t : types)
      if (bad(t)) {
        op->emitOpError("cannot run on the GPU: the tensor type ")
            << t << " is dynamic in a dimension other than 0 (only "
            << "dimension 0, the voxel rows, may be dynamic)";
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(walked.wasInterrupted());
}

/// What the attention library runs (runtime/kernels/attention.h): fp16
/// q / k with head dim 64, 80 or 128 and the given rank.
LogicalResult checkAttentionHeads(Operation *op, Value q, int64_t rank,
                                  StringRef layout) {
  auto t = cast<RankedTensorType>(q.getType());
  int64_t d = t.getShape().back();
  if (!t.getElementType().isF16() || t.getRank() != rank ||
      (d != 64 && d != 80 && d != 128))
    return op->emitOpError("cannot run on the GPU: the attention kernels take "
                           "fp16 ")
           << layout << " with head dim 64, 80 or 128, found " << t;
  return success();
}

} // namespace

LogicalResult partitionForCuda(ModuleOp module,
                               llvm::ArrayRef<std::string> gpuEntries) {
  SymbolTable symbols(module);
  llvm::SetVector<func::FuncOp> gpu;
  SmallVector<func::FuncOp> work;
  for (const std::string &name : gpuEntries)
    if (auto fn = symbols.lookup<func::FuncOp>(name))
      work.push_back(fn);
  while (!work.empty()) {
    func::FuncOp fn = work.pop_back_val();
    if (!gpu.insert(fn))
      continue;
    WalkResult walked = fn.walk([&](func::CallOp call) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      if (!callee) {
        call.emitOpError("calls an unknown function");
        return WalkResult::interrupt();
      }
      work.push_back(callee);
      return WalkResult::advance();
    });
    if (walked.wasInterrupted())
      return failure();
  }
  Builder b(module.getContext());
  for (func::FuncOp fn : gpu) {
    fn->setAttr("trellis.device", b.getStringAttr("cuda"));
    splitConvBias(fn);
    lowerSparseResampling(fn);
    narrowF32Attention(fn);
    if (failed(checkDynamicDims(fn)))
      return failure();
    WalkResult checked = fn.walk([](Operation *op) {
      LogicalResult ok = success();
      if (auto a = dyn_cast<mlir::trellis::AttentionOp>(op))
        ok = checkAttentionHeads(op, a.getQ(), 4, "[B, L, H, d]");
      else if (auto a = dyn_cast<mlir::trellis::SparseAttentionOp>(op))
        ok = checkAttentionHeads(op, a.getQ(), 3, "[N, H, d]");
      else if (auto a = dyn_cast<mlir::trellis::SparseCrossAttentionOp>(op))
        ok = checkAttentionHeads(op, a.getQ(), 3, "[N, H, d]");
      return failed(ok) ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (checked.wasInterrupted())
      return failure();
  }
  return success();
}

namespace {

struct PartitionPass
    : public mlir::trellis::impl::TrellisPartitionCudaBase<PartitionPass> {
  using TrellisPartitionCudaBase::TrellisPartitionCudaBase;
  void runOnOperation() override {
    std::vector<std::string> names(entries.begin(), entries.end());
    if (names.empty())
      names = {"ss_stage"};
    if (failed(partitionForCuda(getOperation(), names)))
      signalPassFailure();
  }
};

} // namespace

} // namespace trellis
