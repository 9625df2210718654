//===- GemmTuningCacheTest.cpp - GEMM picks kept across processes ---------===//
//
// runtime/cuda/GemmTuningCache: the file the GPU executor keeps its timed
// cuBLASLt picks in (GpuOptions::gemmTuningCache). No GPU needed.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GemmTuningCache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace {

using trellis::gpuexec::GemmPicks;
using trellis::gpuexec::readGemmTuningCache;
using trellis::gpuexec::writeGemmTuningCache;
namespace fs = std::filesystem;

class GemmTuningCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("trellis-tuning-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    // A directory that does not exist yet: writing creates it.
    path = (dir / "cache" / "gemm-tuning.json").string();
  }
  void TearDown() override { fs::remove_all(dir); }
  void writeText(const std::string &text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }
  fs::path dir;
  std::string path;
};

TEST_F(GemmTuningCacheTest, MissingFileHasNoPicks) {
  EXPECT_TRUE(readGemmTuningCache(path, "H100 | cuBLASLt 130000").empty());
}

TEST_F(GemmTuningCacheTest, RoundTripPerSection) {
  const std::string h100 = "NVIDIA H100 | cuBLASLt 130000";
  const std::string h200 = "NVIDIA H200 | cuBLASLt 130000";
  ASSERT_TRUE(
      writeGemmTuningCache(path, h100, {{"4096x1024x4096T1e2", "0a3f"}}));
  EXPECT_TRUE(fs::exists(path));
  ASSERT_TRUE(writeGemmTuningCache(path, h200, {{"4096x1024x4096T1e2", "01"}}));
  EXPECT_EQ(readGemmTuningCache(path, h100),
            (GemmPicks{{"4096x1024x4096T1e2", "0a3f"}}));
  EXPECT_EQ(readGemmTuningCache(path, h200),
            (GemmPicks{{"4096x1024x4096T1e2", "01"}}));
  EXPECT_TRUE(readGemmTuningCache(path, "another GPU").empty());
  // No temporary file left behind.
  int files = 0;
  for ([[maybe_unused]] const auto &e :
       fs::directory_iterator(fs::path(path).parent_path()))
    ++files;
  EXPECT_EQ(files, 1);
}

TEST_F(GemmTuningCacheTest, WritesMergeWithWhatOthersWrote) {
  const std::string s = "GPU | cuBLASLt 1";
  ASSERT_TRUE(writeGemmTuningCache(path, s, {{"a", "01"}, {"b", "02"}}));
  // Another process's picks: new keys added, the same key replaced.
  ASSERT_TRUE(writeGemmTuningCache(path, s, {{"b", "05"}, {"c", "00"}}));
  EXPECT_EQ(readGemmTuningCache(path, s),
            (GemmPicks{{"a", "01"}, {"b", "05"}, {"c", "00"}}));
}

TEST_F(GemmTuningCacheTest, UnreadableFilesAreIgnoredAndReplaced) {
  const std::string s = "GPU | cuBLASLt 1";
  for (const char *text :
       {"not json at all", "[1, 2, 3]", "{\"GPU | cuBLASLt 1\": \"07\"}"}) {
    writeText(text);
    EXPECT_TRUE(readGemmTuningCache(path, s).empty()) << text;
    ASSERT_TRUE(writeGemmTuningCache(path, s, {{"a", "02"}})) << text;
    EXPECT_EQ(readGemmTuningCache(path, s), (GemmPicks{{"a", "02"}})) << text;
  }
  // Entries that are not an algorithm's hex text are dropped.
  writeText("{\"GPU | cuBLASLt 1\": {\"a\": 3, \"b\": \"x1\", \"c\": \"\", "
            "\"d\": \"0A\", \"e\": \"00ff\"}}");
  EXPECT_EQ(readGemmTuningCache(path, s), (GemmPicks{{"e", "00ff"}}));
}

TEST_F(GemmTuningCacheTest, UnwritableLocationIsAnError) {
  // The cache's directory would have to be a file.
  writeText("x");
  std::string under = path + "/inside/gemm-tuning.json";
  auto s = writeGemmTuningCache(under, "GPU", {{"a", "01"}});
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

} // namespace
