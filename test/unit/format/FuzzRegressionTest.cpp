//===- FuzzRegressionTest.cpp - Replay fuzz seeds and crashes -------------===//
//
// Runs every file of test/fuzz/corpus/<target>/ and
// test/fuzz/regressions/<target>/ through the target's entry point (the
// same function libFuzzer calls; see test/fuzz/FuzzTarget.h), so CI checks
// past crashes without clang's fuzzer runtime. A failing invariant aborts.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

int trellisFuzz_safetensors_header(const uint8_t *data, size_t size);
int trellisFuzz_npy(const uint8_t *data, size_t size);
int trellisFuzz_npz(const uint8_t *data, size_t size);
int trellisFuzz_bundle(const uint8_t *data, size_t size);
int trellisFuzz_host_program(const uint8_t *data, size_t size);

namespace fs = std::filesystem;

namespace {

struct Target {
  const char *name;
  int (*run)(const uint8_t *, size_t);
};
const Target kTargets[] = {
    {"safetensors_header", trellisFuzz_safetensors_header},
    {"npy", trellisFuzz_npy},
    {"npz", trellisFuzz_npz},
    {"bundle", trellisFuzz_bundle},
    {"host_program", trellisFuzz_host_program},
};

const fs::path kFuzzDir = fs::path(TRELLIS_SOURCE_DIR) / "test" / "fuzz";

/// Replays every file of `dir` (if it exists); returns how many ran.
int replay(const Target &t, const fs::path &dir) {
  int count = 0;
  if (!fs::is_directory(dir))
    return 0;
  for (const auto &entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().filename() == "README.md" ||
        entry.path().filename() == ".gitkeep")
      continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    // A heap copy of exactly the input's size, as libFuzzer passes it, so
    // that sanitizer builds of this test catch overreads too.
    std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size() + 1]);
    std::memcpy(copy.get(), bytes.data(), bytes.size());
    SCOPED_TRACE(entry.path().string());
    EXPECT_EQ(t.run(copy.get(), bytes.size()), 0);
    ++count;
  }
  return count;
}

} // namespace

TEST(FuzzRegressions, SeedCorporaReplay) {
  for (const Target &t : kTargets) {
    int n = replay(t, kFuzzDir / "corpus" / t.name);
    EXPECT_GT(n, 0) << "no seeds for fuzz target " << t.name;
  }
}

TEST(FuzzRegressions, CrashesFoundByFuzzingReplay) {
  int total = 0;
  for (const Target &t : kTargets)
    total += replay(t, kFuzzDir / "regressions" / t.name);
  std::printf("replayed %d regression input(s)\n", total);
  // Regressions of targets this test does not know (added later by other
  // areas) must be replayed by their own test; say so rather than skip
  // them silently.
  fs::path dir = kFuzzDir / "regressions";
  if (fs::is_directory(dir))
    for (const auto &entry : fs::directory_iterator(dir)) {
      if (!entry.is_directory())
        continue;
      bool known = false;
      for (const Target &t : kTargets)
        known |= entry.path().filename() == t.name;
      if (!known)
        std::printf("note: %s is not replayed here; its area's own test "
                    "must replay it (see test/fuzz/README.md)\n",
                    entry.path().string().c_str());
    }
}
