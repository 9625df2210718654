//===- TrellisDialect.cpp - The trellis dialect ---------------------------===//
#include "dialect/TrellisDialect.h"
#include "dialect/TrellisOps.h"
#include "dialect/TrellisTypes.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::trellis;

#include "dialect/TrellisOpsDialect.cpp.inc"

void TrellisDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/TrellisOps.cpp.inc"
      >();
  registerTypesAndAttributes();
}
