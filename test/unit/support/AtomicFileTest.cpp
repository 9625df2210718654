#include "trellis/Support/AtomicFile.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

using namespace trellis;
namespace fs = std::filesystem;

TEST(AtomicFile, AppearsOnlyOnCommit) {
  fs::path dir = fs::temp_directory_path() / "trellis-atomic-test";
  fs::create_directories(dir);
  fs::path target = dir / "out.bin";
  fs::remove(target);
  {
    AtomicFile f(target.string());
    ASSERT_TRUE(f.status().isOk());
    f.write("hello");
    EXPECT_FALSE(fs::exists(target));
    ASSERT_TRUE(f.commit().isOk());
  }
  std::ifstream in(target);
  std::string s;
  in >> s;
  EXPECT_EQ(s, "hello");
}

TEST(AtomicFile, AbandonedWriteLeavesNothing) {
  fs::path dir = fs::temp_directory_path() / "trellis-atomic-test2";
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    AtomicFile f((dir / "partial.bin").string());
    f.write("partial");
  } // no commit
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(AtomicFile, ReportsUnwritableDirectory) {
  AtomicFile f("/nonexistent-dir/x.bin");
  EXPECT_FALSE(f.status().isOk());
  EXPECT_NE(f.status().message().find("/nonexistent-dir/x.bin"),
            std::string::npos);
  EXPECT_FALSE(f.commit().isOk());
}
