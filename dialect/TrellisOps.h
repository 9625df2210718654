//===- TrellisOps.h - Operations of the trellis dialect ---------*- C++ -*-===//
#ifndef TRELLIS_DIALECT_TRELLISOPS_H
#define TRELLIS_DIALECT_TRELLISOPS_H

#include "dialect/TrellisDialect.h"
#include "dialect/TrellisTypes.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::trellis::OpTrait {

/// Verifies that every dynamic dimension of every ranked tensor operand and
/// result carries an upper bound (#trellis.bounds with one entry per `?`).
LogicalResult verifyBoundedShapes(Operation *op);

template <typename ConcreteType>
class BoundedShapes
    : public ::mlir::OpTrait::TraitBase<ConcreteType, BoundedShapes> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return verifyBoundedShapes(op);
  }
};

} // namespace mlir::trellis::OpTrait

#define GET_OP_CLASSES
#include "dialect/TrellisOps.h.inc"

#endif // TRELLIS_DIALECT_TRELLISOPS_H
