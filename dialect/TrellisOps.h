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
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::trellis::OpTrait {

/// Verifies that every dynamic dimension of every ranked tensor operand and
/// result carries an upper bound, and that a #trellis.bounds encoding has
/// exactly one entry per `?`.
LogicalResult verifyBoundedShapes(Operation *op);

template <typename ConcreteType>
class BoundedShapes
    : public ::mlir::OpTrait::TraitBase<ConcreteType, BoundedShapes> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return verifyBoundedShapes(op);
  }
};

/// For an op implementing InferTypeOpInterface: verifies that its result
/// types are the inferred ones, with one message naming the result.
LogicalResult verifyResultsMatchInference(Operation *op);

/// Runs verifyResultsMatchInference with the region verifiers, i.e. after
/// the op's verify() has checked the operands (so inference sees valid
/// ones), and before InferTypeOpInterface's own check, whose two-error
/// report it replaces. List it before InferTypeOpAdaptor.
template <typename ConcreteType>
class ResultsMatchInference
    : public ::mlir::OpTrait::TraitBase<ConcreteType, ResultsMatchInference> {
public:
  static LogicalResult verifyRegionTrait(Operation *op) {
    return verifyResultsMatchInference(op);
  }
};

/// Marker traits of what the compiler's phases do with an op
/// (TrellisOps.td, "What the compiler's phases do with an op").
#define TRELLIS_MARKER_TRAIT(Name)                                             \
  template <typename ConcreteType>                                             \
  class Name : public ::mlir::OpTrait::TraitBase<ConcreteType, Name> {};
TRELLIS_MARKER_TRAIT(GeneratedKernel)
TRELLIS_MARKER_TRAIT(DynamicRowsKernel)
TRELLIS_MARKER_TRAIT(LibraryCall)
TRELLIS_MARKER_TRAIT(HostBound)
TRELLIS_MARKER_TRAIT(RuntimeOp)
TRELLIS_MARKER_TRAIT(StorageOnly)
#undef TRELLIS_MARKER_TRAIT

} // namespace mlir::trellis::OpTrait

#define GET_OP_CLASSES
#include "dialect/TrellisOps.h.inc"

#endif // TRELLIS_DIALECT_TRELLISOPS_H
