//===- host_program.cpp - Fuzz the host program reader
//---------------------===//
//
// Input: the JSON text of a bundle's "program" section (no container, so
// that the mutations reach the program reader instead of the CRC check).
// An accepted program has every slot index in range; anything else is a
// named error, never a crash.
//
//===----------------------------------------------------------------------===//
#include "test/fuzz/FuzzTarget.h"
#include "test/fuzz/ProgramInvariants.h"
#include "trellis/Runtime/Program.h"

#include <string>

using namespace trellis;

TRELLIS_FUZZ_TARGET(host_program) {
  std::string text(reinterpret_cast<const char *>(data), size);
  auto p = Program::parse(text, "[]", "fuzz");
  if (!p) {
    FUZZ_CHECK(!p.message().empty());
    return 0;
  }
  checkProgramInvariants(*p);
  return 0;
}
