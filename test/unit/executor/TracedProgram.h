//===- TracedProgram.h - A traced function as the runtime reads it --------===//
//
// The executor tests trace a small function with the Tracer and run it as a
// host program: the serialization and parse every bundle goes through.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_TEST_UNIT_EXECUTOR_TRACEDPROGRAM_H
#define TRELLIS_TEST_UNIT_EXECUTOR_TRACEDPROGRAM_H

#include "lib/Target/HostProgram.h"
#include "trellis/Runtime/Program.h"
#include "trellis/Trace/Tracer.h"

namespace trellis::test {

/// The host program of `t`'s module with entry "main", or the first trace
/// error.
inline Result<Program> tracedProgram(trace::Tracer &t) {
  if (t.hasErrors())
    return Error{t.errors().front().render()};
  auto serialized = serializeHostProgram(t.module(), {"main"});
  if (mlir::failed(serialized))
    return Error{"serialization failed"};
  return Program::parse(serialized->program, serialized->locations, "test");
}

} // namespace trellis::test

#endif // TRELLIS_TEST_UNIT_EXECUTOR_TRACEDPROGRAM_H
