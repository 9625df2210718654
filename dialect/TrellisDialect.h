//===- TrellisDialect.h - The trellis dialect -------------------*- C++ -*-===//
#ifndef TRELLIS_DIALECT_TRELLISDIALECT_H
#define TRELLIS_DIALECT_TRELLISDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "dialect/TrellisOpsDialect.h.inc"

#endif // TRELLIS_DIALECT_TRELLISDIALECT_H
