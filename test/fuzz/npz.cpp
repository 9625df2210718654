//===- npz.cpp - Fuzz the .npz reader (libzip + .npy parser) --------------===//
//
// Input: an .npz (zip) file image. Accepted archives must yield unique keys
// and arrays whose bytes are all readable (ASan checks them).
//
//===----------------------------------------------------------------------===//
#include "test/fuzz/FuzzTarget.h"
#include "trellis/Format/Npy.h"

#include <set>
#include <string>

using namespace trellis;

TRELLIS_FUZZ_TARGET(npz) {
  auto arrays = parseNpz(data, size, "fuzz.npz");
  if (!arrays) {
    // Errors name the archive, and the member when one is at fault
    // ("fuzz.npz member 'x.npy': ..." from its .npy header).
    FUZZ_CHECK(arrays.message().rfind("fuzz.npz: ", 0) == 0 ||
               arrays.message().rfind("fuzz.npz member '", 0) == 0);
    return 0;
  }
  std::set<std::string> keys;
  unsigned sum = 0;
  for (const auto &[key, t] : *arrays) {
    FUZZ_CHECK(keys.insert(key).second);
    const uint8_t *p = static_cast<const uint8_t *>(t.raw());
    for (size_t i = 0; i < t.nbytes(); ++i)
      sum += p[i];
  }
  return sum == 0xdeadbeef ? 0 : 0; // keep the reads alive
}
