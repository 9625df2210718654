//===- npy.cpp - Fuzz the .npy parser -------------------------------------===//
//
// Input: a .npy file image. Accepted arrays must re-encode (npyHeader +
// bytes, what writeNpy writes) into a file that parses back identically.
//
//===----------------------------------------------------------------------===//
#include "trellis/Format/Npy.h"
#include "test/fuzz/FuzzTarget.h"

#include <cstring>
#include <string>

using namespace trellis;

TRELLIS_FUZZ_TARGET(npy) {
  auto t = parseNpy(data, size, "fuzz.npy");
  if (!t) {
    FUZZ_CHECK(t.message().rfind("fuzz.npy: ", 0) == 0);
    return 0;
  }
  FUZZ_CHECK(t->nbytes() <= size);
  auto header = npyHeader(t->dtype(), t->shape());
  FUZZ_CHECK(header);
  FUZZ_CHECK(header->size() % 64 == 0);
  std::string image = *header;
  image.append(static_cast<const char *>(t->raw()), t->nbytes());
  auto back = parseNpy(image.data(), image.size(), "round trip");
  FUZZ_CHECK(back);
  FUZZ_CHECK(back->dtype() == t->dtype() && back->shape() == t->shape());
  FUZZ_CHECK(std::memcmp(back->raw(), t->raw(), t->nbytes()) == 0);
  return 0;
}
