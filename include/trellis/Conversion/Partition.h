//===- Partition.h - Split the module between the GPU and host --*- C++ -*-===//
//
// The partition phase for --target=cuda (docs/design/gpu-backend.md):
//   * puts `trellis.device = "cuda"` on the GPU entry functions and on every
//     function they call (transitively, through sampler bodies too);
//   * rewrites ops in those functions into the forms the GPU backend has
//     commands for: conv3d with a bias becomes conv3d + a broadcast add (the
//     bias runs along the output's channel axis, which cuBLASLt's bias
//     epilogue cannot address in the channel-first layout).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_CONVERSION_PARTITION_H
#define TRELLIS_CONVERSION_PARTITION_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <string>
#include <vector>

namespace trellis {

/// Marks `gpuEntries` and their callees for the GPU and rewrites their ops.
/// Entries that do not exist are ignored (a module may lack a stage).
mlir::LogicalResult partitionForCuda(mlir::ModuleOp module,
                                     llvm::ArrayRef<std::string> gpuEntries);

} // namespace trellis

#endif // TRELLIS_CONVERSION_PARTITION_H
