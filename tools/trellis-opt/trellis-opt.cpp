//===- trellis-opt.cpp - mlir-opt with the trellis dialect and passes -----===//
//
// Parses, verifies, transforms and prints IR: the driver of the lit tests.
// Registers the trellis dialect and passes next to upstream's. The input is
// read here, not by MlirOptMain, so that its nesting depth is checked before
// MLIR's recursive parser sees it (trellis/Support/NestingDepth.h).
//
//===----------------------------------------------------------------------===//
#include "dialect/BackendPasses.h"
#include "dialect/TrellisDialect.h"
#include "lib/Transforms/Passes.h"
#include "trellis/Support/NestingDepth.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  mlir::registerAllPasses();
  mlir::trellis::registerTrellisPasses();
  mlir::trellis::registerTrellisBackendPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  registry.insert<mlir::trellis::TrellisDialect>();
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv, "trellis optimizer driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, inputFilename, outputFilename, registry));

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (trellis::Status deep = trellis::checkNestingDepth(
          input->getBuffer(), inputFilename == "-" ? "<stdin>" : inputFilename);
      !deep) {
    llvm::errs() << deep.message() << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
