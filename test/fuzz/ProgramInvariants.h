//===- ProgramInvariants.h - What an accepted host program guarantees -----===//
//
// Shared by the fuzz targets that reach Program::parse (bundle,
// host_program): every slot an accepted program names is below its
// function's num_slots (ProgramChecker in runtime/program/Program.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_TEST_FUZZ_PROGRAMINVARIANTS_H
#define TRELLIS_TEST_FUZZ_PROGRAMINVARIANTS_H

#include "test/fuzz/FuzzTarget.h"
#include "trellis/Runtime/Program.h"

inline void checkProgramInvariants(const trellis::Program &p) {
  for (const trellis::Function &f : p.functions()) {
    auto inRange = [&](const std::vector<int> &slots) {
      for (int s : slots)
        FUZZ_CHECK(s >= 0 && s < f.numSlots);
    };
    inRange(f.args);
    inRange(f.results);
    for (const trellis::Instr &i : f.body) {
      inRange(i.in);
      inRange(i.out);
    }
  }
}

#endif // TRELLIS_TEST_FUZZ_PROGRAMINVARIANTS_H
