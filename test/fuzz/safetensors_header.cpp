//===- safetensors_header.cpp - Fuzz the safetensors header validator -----===//
//
// Input: a whole safetensors file image. Accepted files must tile their data
// section, hand out in-bounds views (every byte is read, so ASan checks the
// bounds), and survive a round trip through planSafetensors: the canonical
// re-encoding of the same tensors parses back to the same tensors.
//
//===----------------------------------------------------------------------===//
#include "test/fuzz/FuzzTarget.h"
#include "trellis/Format/Safetensors.h"

#include <cstring>
#include <string>

using namespace trellis;

TRELLIS_FUZZ_TARGET(safetensors_header) {
  auto file = SafetensorsFile::fromMemory(data, size, "fuzz.safetensors");
  if (!file) {
    FUZZ_CHECK(file.message().rfind("'fuzz.safetensors': ", 0) == 0);
    return 0;
  }
  const SafetensorsFile &f = **file;
  FUZZ_CHECK(f.dataOffset() <= size);
  uint64_t covered = 0;
  unsigned sum = 0;
  std::vector<TensorSpec> specs;
  for (const auto &e : f.entries()) {
    FUZZ_CHECK(e.begin == covered);
    covered = e.end;
    FUZZ_CHECK(f.find(e.name) == &e);
    HostTensor t = f.tensor(e);
    FUZZ_CHECK(t.nbytes() == e.nbytes());
    const uint8_t *p = static_cast<const uint8_t *>(t.raw());
    for (size_t i = 0; i < t.nbytes(); ++i)
      sum += p[i];
    specs.push_back({e.name, e.dtype, e.shape});
  }
  FUZZ_CHECK(f.dataOffset() + covered == size);

  auto layout = planSafetensors(specs, f.metadata());
  FUZZ_CHECK(layout);
  FUZZ_CHECK(layout->header.size() % 8 == 0);
  FUZZ_CHECK(layout->dataSize == covered);
  std::string image(8, '\0');
  uint64_t n = layout->header.size();
  for (int i = 0; i < 8; ++i)
    image[i] = char(n >> (8 * i));
  image += layout->header;
  for (size_t idx : layout->order) {
    const SafetensorsEntry *e = f.find(specs[idx].name);
    image.append(reinterpret_cast<const char *>(data) + f.dataOffset() +
                     e->begin,
                 e->nbytes());
  }
  auto again = SafetensorsFile::fromMemory(image.data(), image.size(), "rt");
  FUZZ_CHECK(again);
  FUZZ_CHECK((*again)->entries().size() == specs.size());
  FUZZ_CHECK((*again)->metadata() == f.metadata());
  for (const auto &e : (*again)->entries()) {
    const SafetensorsEntry *orig = f.find(e.name);
    FUZZ_CHECK(orig && orig->dtype == e.dtype && orig->shape == e.shape);
    FUZZ_CHECK(std::memcmp(image.data() + (*again)->dataOffset() + e.begin,
                           data + f.dataOffset() + orig->begin,
                           e.nbytes()) == 0);
  }
  return sum == 0xdeadbeef ? 0 : 0; // keep the reads alive
}
