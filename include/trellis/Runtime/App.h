//===- App.h - The trellis.exe command line ---------------------*- C++ -*-===//
#ifndef TRELLIS_RUNTIME_APP_H
#define TRELLIS_RUNTIME_APP_H

namespace trellis {

/// main() of trellis.exe (the runtime with an embedded bundle) and of the
/// bare runtime `trellis-runtime --bundle FILE`. Returns the exit code.
int runtimeMain(int argc, char **argv);

} // namespace trellis

#endif // TRELLIS_RUNTIME_APP_H
