//===- Partition.cpp - Split the module between the GPU and the host ------===//
#include "trellis/Conversion/Partition.h"

#include "dialect/TrellisOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/ADT/SetVector.h"

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
    : public PassWrapper<PartitionPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PartitionPass)
  PartitionPass() = default;
  PartitionPass(const PartitionPass &other) : PassWrapper(other) {}

  StringRef getArgument() const final { return "trellis-partition-cuda"; }
  StringRef getDescription() const final {
    return "Mark the GPU entry functions and their callees "
           "(trellis.device = \"cuda\") and rewrite their ops into forms the "
           "GPU backend runs (conv3d bias -> broadcast add)";
  }
  void runOnOperation() override {
    std::vector<std::string> names(entries.begin(), entries.end());
    if (failed(partitionForCuda(getOperation(), names)))
      signalPassFailure();
  }

  ListOption<std::string> entries{
      *this, "entries",
      llvm::cl::desc("GPU entry functions (default: ss_stage)"),
      llvm::cl::list_init<std::string>({"ss_stage"})};
};

} // namespace

void registerPartitionPass() { PassRegistration<PartitionPass>(); }

} // namespace trellis
