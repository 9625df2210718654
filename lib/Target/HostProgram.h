//===- HostProgram.h - trellis IR -> the runtime's host program -*- C++ -*-===//
//
// The host program is the part of the bundle that says what to run: the
// module's functions, each a list of ops over numbered value slots, with
// nested bodies for region ops (the sampler). It is generic over op names
// and attributes, so adding an op to the dialect needs no change here — only
// a kernel in the runtime. Format (JSON, section "program"):
//
//   {"format": "trellis-host-program", "version": 1,
//    "entries": ["ss_stage", ...],
//    "functions": [{"name": "f", "args": [0, 1], "arg_types": [T, T],
//                   "results": [5], "body": [OP, ...]}]}
//   OP = {"op": "trellis.linear", "in": [0, 1, 2], "out": [3],
//         "types": [T], "attrs": {...}, "loc": 7,
//         "regions": [{"args": [9, 10], "body": [OP...], "yield": [12]}]}
//   T  = {"kind": "tensor", "dtype": "f16", "shape": [-1, 1024],
//         "bounds": [32768]} | {"kind": "coords", "resolution": 64,
//         "bound": 32768} | {"kind": "neighbor_map", ...} | ...
//
// Locations go to a separate table (section "locations"): a list of
// {"module": ..., "config": "file:line:col", "source": "file:line:col",
//  "source_kind": "builder" | "user", "text": <printed MLIR location>}.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_TARGET_HOSTPROGRAM_H
#define TRELLIS_TARGET_HOSTPROGRAM_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace trellis {

struct SerializedProgram {
  std::string program;   // JSON
  std::string locations; // JSON
};

/// Serializes `module`; `entries` are the functions the runtime may call
/// (each must exist). Fails (with a diagnostic on the offending op) on an op
/// or type the runtime cannot represent.
mlir::FailureOr<SerializedProgram>
serializeHostProgram(mlir::ModuleOp module,
                     llvm::ArrayRef<std::string> entries);

} // namespace trellis

#endif // TRELLIS_TARGET_HOSTPROGRAM_H
