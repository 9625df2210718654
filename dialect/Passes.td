//===- Passes.td - Passes of the trellis dialect -----------*- tablegen -*-===//
//
// Every transformation of the compiler is a pass declared here, with its
// registration generated (trellis-opt lists them under --help).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_PASSES_TD
#define TRELLIS_PASSES_TD

include "mlir/Pass/PassBase.td"

def TrellisVerifyLocations : Pass<"trellis-verify-locations", "ModuleOp"> {
  let summary = "Reject operations without a source location";
  let description = [{
    Every operation must say where it came from (the model key and module
    path, the config position, the builder or Python line; DESIGN.md §4).
    This pass fails on any operation whose location is `unknown`, naming the
    op and its nearest located parent. The compiler runs it after every phase
    in debug builds and at the end of the graph phase always.
  }];
}

#endif // TRELLIS_PASSES_TD
