//===- bundle.cpp - Fuzz the bundle container and the host program --------===//
//
// Input: a bundle image (what trellisc writes, trellis-runtime --bundle
// reads). A bundle is untrusted input: the container (section table, CRCs)
// and the host program in it (slots, types, locations, attributes) must end
// in a named error or a program whose every index is in range — never a
// crash, an abort or an allocation the input sized unchecked.
//
//===----------------------------------------------------------------------===//
#include "trellis/Runtime/Bundle.h"
#include "test/fuzz/FuzzTarget.h"
#include "test/fuzz/ProgramInvariants.h"
#include "trellis/Runtime/Program.h"

#include <string>
#include <string_view>

using namespace trellis;

TRELLIS_FUZZ_TARGET(bundle) {
  auto bundle = Bundle::parse(
      std::string_view(reinterpret_cast<const char *>(data), size), "fuzz");
  if (!bundle) {
    FUZZ_CHECK(!bundle.message().empty());
    return 0;
  }
  const std::string *program = bundle->find("program");
  if (!program)
    return 0;
  const std::string *locations = bundle->find("locations");
  auto p = Program::parse(*program, locations ? *locations : "[]", "fuzz");
  if (!p) {
    FUZZ_CHECK(!p.message().empty());
    return 0;
  }
  checkProgramInvariants(*p);
  return 0;
}
