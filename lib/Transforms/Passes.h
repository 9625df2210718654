//===- Passes.h - Passes of the trellis dialect -----------------*- C++ -*-===//
#ifndef TRELLIS_TRANSFORMS_PASSES_H
#define TRELLIS_TRANSFORMS_PASSES_H

#include "dialect/TrellisOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::trellis {

#define GEN_PASS_DECL
#include "dialect/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialect/Passes.h.inc"

} // namespace mlir::trellis

#endif // TRELLIS_TRANSFORMS_PASSES_H
