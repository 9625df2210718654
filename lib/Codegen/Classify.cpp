//===- Classify.cpp - What the codegen does with each op ------------------===//
//
// classify(): an op's class (docs/design/gpu-backend.md, "Op classes");
// supportsDynamicRows(): the generated ops whose kernels take dynamic rows.
//
//===----------------------------------------------------------------------===//
#include "KernelFamilies.h"

namespace trellis::codegen::detail {

OpClass classify(Operation *op) {
  StringRef n = op->getName().getStringRef();
  if (isa<func::CallOp, func::ReturnOp>(op))
    return OpClass::View;
  if (!n.consume_front("trellis."))
    return OpClass::Unsupported;
  if (n == "linear" || n == "matmul" || n == "attention")
    return OpClass::Library;
  // A GEMM with the residual and the LayerNorm as its epilogue: the
  // runtime's in-tree kernel (or cuBLASLt and a row kernel).
  if (n == "linear_residual_norm")
    return OpClass::Library;
  // The time tables of trellis-hoist-time: runtime commands (the grid
  // written from the host, a row copied at the table offset of the step).
  if (n == "time_grid" || n == "time_row")
    return OpClass::Library;
  if (n == "conv3d")
    return OpClass::Conv;
  if (n == "reshape" || n == "weight" || n == "constant" || n == "yield" ||
      n == "shared_yield")
    return OpClass::View;
  if (n == "flow_sample")
    return OpClass::Sampler;
  // A 3×3×3 sparse conv: generated neighbour gather and tap sum around the
  // runtime's GEMMs (or its implicit-GEMM kernel); a 1×1×1 one is a GEMM.
  if (n == "sparse.conv3d") {
    auto w = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
    bool pointwise = w && w.getRank() == 5 && w.getDimSize(1) == 1;
    return pointwise ? OpClass::Library : OpClass::SparseConv;
  }
  // The attention over voxels: the attention kernels.
  if (n == "sparse.attention" || n == "sparse.cross_attention")
    return OpClass::Library;
  // Coordinate values, evaluated on the host when the runtime binds a sparse
  // function (and the dense stage's occupancy, the mesh extraction).
  if (llvm::is_contained(
          {"sparse.from_tensor", "sparse.coarsen", "sparse.subdivide",
           "sparse.neighbor_map", "sparse.parent_neighbor_map",
           "sparse.batch_segments", "sparse.window_segments", "sparse.xyz",
           "sparse.to_tensor", "sparse.unique_mean", "sparse.parent_rows",
           "sparse.child_rows", "sparse.batch_index", "ape", "occupancy"},
          n) ||
      n.starts_with("mesh."))
    return OpClass::Host;
  if (isUnaryName(n) ||
      llvm::is_contained(
          {"cast", "add", "sub", "mul", "div", "maximum", "modulate",
           "gated_residual", "cfg_combine", "euler_update", "layer_norm",
           "head_rms_norm", "softmax", "timestep_embedding", "pixel_shuffle_3d",
           "permute", "concat", "split", "layer_norm_modulate",
           "gated_residual_norm", "broadcast_rows", "gather_rows",
           "segment_mean", "sparse.subdivide_features",
           // (its elementwise half; the
           // statistics are the runtime's)
           "sparse.group_norm"},
          n))
    return OpClass::Generated;
  return OpClass::Unsupported;
}

/// The ops whose kernels take dynamic rows (docs/design/gpu-backend.md).
bool supportsDynamicRows(Operation *op, StringRef n) {
  if (isUnaryName(n) ||
      llvm::is_contained({"cast", "add", "sub", "mul", "div", "maximum",
                          "modulate", "gated_residual", "layer_norm",
                          "layer_norm_modulate", "gated_residual_norm",
                          "head_rms_norm"},
                         n))
    return true;
  if (n == "split" || n == "concat") {
    int64_t axis = intAttrOr(op, "axis", 0);
    Value whole = n == "split" ? op->getOperand(0) : op->getResult(0);
    if (axis < 0)
      axis += cast<RankedTensorType>(whole.getType()).getRank();
    return axis >= 1;
  }
  return false;
}

} // namespace trellis::codegen::detail
