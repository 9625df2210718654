//===- Kernels.h - gpu.func emitters of the generated ops -------*- C++ -*-===//
//
// Internal to lib/Codegen. Each emitter appends one `gpu.func` to the kernels'
// `gpu.module` and returns its launch configuration. Kernel arguments are
// flattened static memrefs (`memref<N x T>`), lowered with the bare-pointer
// calling convention to one device pointer each.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_LIB_CODEGEN_KERNELS_H
#define TRELLIS_LIB_CODEGEN_KERNELS_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Operation.h"

#include <array>
#include <cstdint>
#include <optional>

namespace trellis::codegen::detail {

struct Launch {
  std::array<int64_t, 3> grid = {1, 1, 1}; ///< dynamic rows: for the bound
  std::array<int64_t, 3> block = {1, 1, 1};
  int64_t smem = 0;
  /// Kernels with dynamic rows (a trailing `i64 rows` parameter): threads per
  /// dimension-0 row; the runtime launches max(1, ceil(rows·T / block.x))
  /// blocks. 0 for static kernels.
  int64_t threadsPerRow = 0;
};

/// What the codegen does with an op of a CUDA function.
enum class OpClass {
  Generated,
  Library,
  Conv,
  SparseConv,
  View,
  Sampler,
  Host,
  Unsupported
};

/// The class of `op` (docs/design/gpu-backend.md, "Op classes").
OpClass classify(mlir::Operation *op);

/// Emits the kernel of a generated op (parameters: operands, then results;
/// then `i64 rows` when dimension 0 is dynamic: the kernel is built for the
/// bound and guards on the actual rows). Emits a diagnostic on `op` and fails
/// when it has no GPU implementation (e.g. a dynamic dimension other than 0).
/// With `e4m3Result` (from e4m3ResultOf): the variant that writes that result
/// in E4M3 (an i8 buffer) at a scale given at launch, an `f32 quantize`
/// parameter after the results.
mlir::FailureOr<Launch>
emitOpKernel(mlir::Operation *op, mlir::gpu::GPUModuleOp module,
             llvm::StringRef name,
             std::optional<unsigned> e4m3Result = std::nullopt);

/// The result of `op` that an E4M3 variant of its kernel writes for an FP8
/// GEMM (docs/fp8.md, "Where the activations are quantized"): the
/// normalized f16 result of a layer_norm_modulate or gated_residual_norm
/// whose only reader, through reshapes, is a static-scale FP8 linear
/// (precision "fp8_e4m3" with activation_amax) as its input, its rows held
/// in registers in vectors of an even width. nullopt otherwise.
std::optional<unsigned> e4m3ResultOf(mlir::Operation *op);

/// The im2col kernel of a trellis.conv3d: parameters (x, col), col
/// [B, Cin·k³, D'·H'·W'] in x's dtype; `scratchBytes` is its size.
mlir::FailureOr<Launch> emitIm2colKernel(mlir::Operation *conv,
                                         mlir::gpu::GPUModuleOp module,
                                         llvm::StringRef name,
                                         int64_t &scratchBytes);

/// Whether a trellis.conv3d runs as one direct kernel (few output channels:
/// the SS decoder's f32 output conv, 32 -> 1) instead of im2col + GEMM.
bool isDirectConv(mlir::Operation *conv);

/// The direct kernel of such a conv: parameters (x, w, out); one thread per
/// output position computes its Cout sums in f32 (no scratch).
mlir::FailureOr<Launch> emitDirectConvKernel(mlir::Operation *conv,
                                             mlir::gpu::GPUModuleOp module,
                                             llvm::StringRef name);

/// The two generated kernels of a 3×3×3 trellis.sparse.conv3d (the runtime
/// picks between them and its implicit-GEMM kernel per binding,
/// docs/design/gpu-backend.md "Sparse convolution"):
///  * the neighbour gather (sparse im2col): parameters (x, neighbours, col,
///    row0: i64, rows: i64); col [rows, k³·Cin] in x's dtype holds output
///    rows row0.. in chunks of at most `chunkRows`;
///  * the tap sum of the taps-first order: parameters (y, neighbours,
///    [bias,] out, rows: i64, rowsIn: i64); y the f32 products
///    [k³, rowsIn, Cout], of at most `tapsBytes`.
struct SparseConvKernels {
  Launch gather, tapSum;
  /// The gather's col scratch (chunkRows rows); the products' largest size.
  int64_t chunkRows = 0, gatherBytes = 0, tapsBytes = 0;
};
mlir::FailureOr<SparseConvKernels>
emitSparseConvKernels(mlir::Operation *conv, mlir::gpu::GPUModuleOp module,
                      llvm::StringRef gatherName, llvm::StringRef tapSumName);

/// The row movement of a trellis.sparse.attention over Swin windows (its
/// segments from trellis.sparse.window_segments, whose rows are not in window
/// order), for rows of `rowsType` ([?, H, d]): the gather of q, k or v into
/// window order, parameters (x, window rows, out, x_row_stride: i64,
/// rows: i64) — x may be a strided view of a packed qkv — or (`scatter`) the
/// output back, parameters (x, window rows, out, rows):
/// out[window_rows[r]] = x[r].
mlir::FailureOr<Launch> emitWindowRowsKernel(mlir::Operation *attention,
                                             mlir::Type rowsType, bool scatter,
                                             mlir::gpu::GPUModuleOp module,
                                             llvm::StringRef name);

/// The update kernel of a trellis.flow_sample: parameters (x, v_cond,
/// v_uncond, x_next: f32*, strength: f32, dt: f32, guided: i32), then
/// `rows: i64` for a sample with dynamic rows.
mlir::FailureOr<Launch> emitFlowUpdateKernel(mlir::Operation *flow,
                                             mlir::gpu::GPUModuleOp module,
                                             llvm::StringRef name);

/// Multidiffusion's mean of the per-image velocities, one image at a time:
/// parameters (sum, v, sum_next: f32*, scale: f32), then `rows: i64` for a
/// sample with dynamic rows; sum_next = (sum + v)·scale (scale 1, then 1/N
/// at the last image, as the CPU reference sums then scales).
mlir::FailureOr<Launch> emitVelocitySumKernel(mlir::Operation *flow,
                                              mlir::gpu::GPUModuleOp module,
                                              llvm::StringRef name);

} // namespace trellis::codegen::detail

#endif // TRELLIS_LIB_CODEGEN_KERNELS_H
