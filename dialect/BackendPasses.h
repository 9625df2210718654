//===- BackendPasses.h - The GPU backend's passes ---------------*- C++ -*-===//
//
// trellis-partition-cuda (lib/Conversion) and trellis-gpu-codegen
// (lib/Codegen), declared in BackendPasses.td. registerTrellisBackendPasses()
// needs both libraries linked.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_DIALECT_BACKENDPASSES_H
#define TRELLIS_DIALECT_BACKENDPASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <string>

namespace mlir::trellis {

#define GEN_PASS_DECL
#include "dialect/BackendPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialect/BackendPasses.h.inc"

} // namespace mlir::trellis

#endif // TRELLIS_DIALECT_BACKENDPASSES_H
