//===- ConfigFuzzReplayTest.cpp - Replay the config fuzzer's inputs -------===//
//
// Runs every file of test/fuzz/corpus/config/ and test/fuzz/regressions/
// config/ through the config fuzz target (test/fuzz/config_fuzzer.cpp, the
// function libFuzzer calls), so CI checks its invariants and past crashes
// without clang's fuzzer runtime. A failing invariant aborts.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

int trellisFuzz_config(const uint8_t *data, size_t size);

namespace fs = std::filesystem;

namespace {

int replay(const fs::path &dir) {
  int count = 0;
  if (!fs::is_directory(dir))
    return 0;
  for (const fs::directory_entry &e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename() == "README.md")
      continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::string bytes(std::istreambuf_iterator<char>(in), {});
    SCOPED_TRACE(e.path().string());
    EXPECT_EQ(
        trellisFuzz_config(reinterpret_cast<const uint8_t *>(bytes.data()),
                           bytes.size()),
        0);
    ++count;
  }
  return count;
}

TEST(ConfigFuzzReplay, CorpusAndRegressions) {
  fs::path fuzz = fs::path(TRELLIS_SOURCE_DIR) / "test" / "fuzz";
  int n = replay(fuzz / "corpus" / "config");
  n += replay(fuzz / "regressions" / "config");
  n += replay(fuzz / "regressions" / "config_fuzzer");
  EXPECT_GE(n, 10);
}

TEST(ConfigFuzzReplay, HandcraftedEdgeCases) {
  const char *inputs[] = {
      "",
      "{",
      "[",
      "\"",
      "{}",
      "[]",
      "null",
      "{\"name\": null}",
      "{\"name\": \"SparseStructureDecoder\", \"args\": {\"channels\": []}}",
      "{\"name\": \"SLatMeshDecoder\", \"args\": {\"model_channels\": 0}}",
      "{\"name\": \"TrellisImageTo3DPipeline\", \"args\": {\"models\": []}}",
      "{\"name\": \"SparseStructureFlowModel\", \"args\": {\"resolution\": "
      "4096, \"in_channels\": 65536, \"out_channels\": 65536, "
      "\"model_channels\": 65536, \"cond_channels\": 65536, \"num_blocks\": "
      "1024, \"patch_size\": 1, \"num_head_channels\": 1, \"mlp_ratio\": 16}}",
  };
  for (const char *in : inputs) {
    std::string s(in);
    EXPECT_EQ(trellisFuzz_config(reinterpret_cast<const uint8_t *>(s.data()),
                                 s.size()),
              0)
        << in;
  }
}

} // namespace
