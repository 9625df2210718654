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

namespace trellis::codegen::detail {

struct Launch {
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {1, 1, 1};
  int64_t smem = 0;
};

/// What the codegen does with an op of a CUDA function.
enum class OpClass {
  Generated,
  Library,
  Conv,
  View,
  Sampler,
  Host,
  Unsupported
};

/// The class of `op` (docs/design/gpu-backend.md, "Op classes").
OpClass classify(mlir::Operation *op);

/// Emits the kernel of a generated op (parameters: operands, then results).
/// Emits a diagnostic on `op` and fails when it has no GPU implementation
/// (e.g. a dynamic shape).
mlir::FailureOr<Launch> emitOpKernel(mlir::Operation *op,
                                     mlir::gpu::GPUModuleOp module,
                                     llvm::StringRef name);

/// The im2col kernel of a trellis.conv3d: parameters (x, col), col
/// [B, Cin·k³, D'·H'·W'] in x's dtype; `scratchBytes` is its size.
mlir::FailureOr<Launch> emitIm2colKernel(mlir::Operation *conv,
                                         mlir::gpu::GPUModuleOp module,
                                         llvm::StringRef name,
                                         int64_t &scratchBytes);

/// The update kernel of a trellis.flow_sample: parameters (x, v_cond,
/// v_uncond, x_next: f32*, strength: f32, dt: f32, guided: i32).
mlir::FailureOr<Launch> emitFlowUpdateKernel(mlir::Operation *flow,
                                             mlir::gpu::GPUModuleOp module,
                                             llvm::StringRef name);

} // namespace trellis::codegen::detail

#endif // TRELLIS_LIB_CODEGEN_KERNELS_H
