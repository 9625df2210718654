//===- Classify.cpp - What the codegen does with each op ------------------===//
//
// classify(): an op's class (docs/design/gpu-backend.md, "Op classes"), from
// the op's traits (dialect/TrellisOps.td) and, for the ops with a family of
// their own, its type; supportsDynamicRows(): the generated ops whose kernels
// take dynamic rows.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/KernelFamilies.h"

namespace trellis::codegen::detail {

OpClass classify(Operation *op) {
  namespace tr = mlir::trellis;
  namespace traits = mlir::trellis::OpTrait;
  if (isa<func::CallOp, func::ReturnOp>(op) ||
      op->hasTrait<traits::StorageOnly>())
    return OpClass::View;
  if (op->hasTrait<traits::LibraryCall>())
    return OpClass::Library;
  if (isa<tr::Conv3dOp>(op))
    return OpClass::Conv;
  if (isa<tr::FlowSampleOp>(op))
    return OpClass::Sampler;
  // A 3×3×3 sparse conv: generated neighbour gather and tap sum around the
  // runtime's GEMMs (or its implicit-GEMM kernel); a 1×1×1 one is a GEMM.
  if (isa<tr::SparseConv3dOp>(op)) {
    auto w = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
    bool pointwise = w && w.getRank() == 5 && w.getDimSize(1) == 1;
    return pointwise ? OpClass::Library : OpClass::SparseConv;
  }
  // Coordinate values, evaluated on the host when the runtime binds a sparse
  // function, and what the runtime's own code runs.
  if (op->hasTrait<traits::HostBound>() || op->hasTrait<traits::RuntimeOp>())
    return OpClass::Host;
  if (op->hasTrait<traits::GeneratedKernel>())
    return OpClass::Generated;
  return OpClass::Unsupported;
}

/// The ops whose kernels take dynamic rows (docs/design/gpu-backend.md).
bool supportsDynamicRows(Operation *op) {
  if (!op->hasTrait<mlir::trellis::OpTrait::DynamicRowsKernel>())
    return false;
  // A reduction over dimension 0 would loop over the dynamic rows.
  if (auto reduce = dyn_cast<mlir::trellis::ReduceOp>(op)) {
    int64_t axis = reduce.getAxisAttr().getInt();
    return axis != 0 && axis != -reduce.getInput().getType().getRank();
  }
  if (isa<mlir::trellis::SplitOp, mlir::trellis::ConcatOp>(op)) {
    // Along dimension 0 the pieces' rows are not the whole's.
    int64_t axis = intAttrOr(op, "axis", 0);
    Value whole =
        isa<mlir::trellis::SplitOp>(op) ? op->getOperand(0) : op->getResult(0);
    if (axis < 0)
      axis += cast<RankedTensorType>(whole.getType()).getRank();
    return axis >= 1;
  }
  return true;
}

} // namespace trellis::codegen::detail
