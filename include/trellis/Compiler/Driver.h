//===- Driver.h - The trellisc compiler driver ------------------*- C++ -*-===//
//
// The whole compiler behind one call, so that tools/trellisc is a one-line
// main() and the Python package can reuse it through the C API.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_COMPILER_DRIVER_H
#define TRELLIS_COMPILER_DRIVER_H

namespace trellis {

/// Parses the command line and runs the requested compile phases.
/// Returns the process exit code (0 on success, 1 on a compile error,
/// 2 on a usage error).
int compilerMain(int argc, char **argv);

} // namespace trellis

#endif // TRELLIS_COMPILER_DRIVER_H
