//===- trellis-opt.cpp - mlir-opt with the trellis dialect and passes -----===//
//
// Parses, verifies, transforms and prints IR: the driver of the lit tests.
// Registers the trellis dialect and passes next to upstream's.
//
//===----------------------------------------------------------------------===//
#include "dialect/BackendPasses.h"
#include "dialect/TrellisDialect.h"
#include "lib/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::trellis::registerTrellisPasses();
  mlir::trellis::registerTrellisBackendPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  registry.insert<mlir::trellis::TrellisDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "trellis optimizer driver\n", registry));
}
