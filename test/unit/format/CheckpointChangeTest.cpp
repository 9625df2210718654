//===- CheckpointChangeTest.cpp - Checkpoints that change while open ------===//
//
// A safetensors checkpoint truncated or rewritten in place after open()
// must make SafetensorsFile::read/load fail with a message naming the file,
// the tensor and what changed (reading through the mapping would end the
// process with SIGBUS); one replaced through a rename is read as it was.
//
//===----------------------------------------------------------------------===//
#include "trellis/Format/Safetensors.h"

#include "test/unit/format/TestUtil.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace trellis;
using namespace trellis::test;

namespace {

/// a = F32[256, 256] (256 KiB, data bytes [0, 262144)), b = F16[64].
std::string writeCheckpoint(const TempDir &dir, unsigned seed = 1,
                            const std::string &name = "model.safetensors") {
  std::string path = dir.file(name);
  HostTensor a = patternTensor(DType::F32, {256, 256}, seed);
  HostTensor b = patternTensor(DType::F16, {64}, seed + 1);
  std::vector<TensorSpec> specs = {{"a", a.dtype(), a.shape()},
                                   {"b", b.dtype(), b.shape()}};
  EXPECT_TRUE(writeSafetensors(path, specs, [&](size_t i, void *dst) {
                const HostTensor &t = i == 0 ? a : b;
                std::memcpy(dst, t.raw(), t.nbytes());
              }).isOk());
  return path;
}

#define EXPECT_ERROR(error, ...)                                               \
  do {                                                                         \
    std::string e_ = (error);                                                  \
    for (const std::string &s_ :                                               \
         std::initializer_list<std::string>{__VA_ARGS__})                      \
      EXPECT_NE(e_.find(s_), std::string::npos)                                \
          << "expected \"" << s_ << "\" in: " << e_;                           \
  } while (0)

} // namespace

TEST(CheckpointChange, LoadReadsTheSameBytesAsTheView) {
  TempDir dir("ckpt-same");
  std::string path = writeCheckpoint(dir);
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.isOk()) << f.message();
  for (const auto &e : (*f)->entries()) {
    auto t = (*f)->load(e);
    ASSERT_TRUE(t.isOk()) << t.message();
    EXPECT_TRUE(sameBytes(*t, (*f)->tensor(e))) << e.name;
    EXPECT_FALSE(t->isReadOnly()); // an owned copy, not the mapping
  }
}

TEST(CheckpointChange, TruncatedAfterOpenIsANamedError) {
  TempDir dir("ckpt-trunc");
  std::string path = writeCheckpoint(dir);
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.isOk()) << f.message();
  const uint64_t size = (*f)->fileSize();
  const uint64_t data = (*f)->dataOffset();
  ASSERT_EQ(::truncate(path.c_str(), off_t(data + 1000)), 0);
  const SafetensorsEntry &a = *(*f)->find("a");
  auto t = (*f)->load(a);
  ASSERT_FALSE(t.isOk());
  EXPECT_ERROR(t.message(), ("'" + path + "' changed while in use"),
               ("it was " + std::to_string(size) + " bytes when it was opened"),
               ("it is " + std::to_string(data + 1000) + " bytes now"),
               ("cannot read tensor 'a' (bytes [" + std::to_string(data) +
                ", " + std::to_string(data + 262144) + ") of the file)"));
  // The other tensor, wholly past the new end, too.
  auto b = (*f)->load(*(*f)->find("b"));
  ASSERT_FALSE(b.isOk());
  EXPECT_ERROR(b.message(), "cannot read tensor 'b'");
  // Truncated to nothing: the same, no signal.
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  std::vector<uint8_t> dst(a.nbytes());
  Status s = (*f)->read(a, dst.data());
  ASSERT_FALSE(s.isOk());
  EXPECT_ERROR(s.message(), "it is 0 bytes now", "tensor 'a'");
}

TEST(CheckpointChange, RewrittenInPlaceIsANamedError) {
  TempDir dir("ckpt-rewrite");
  std::string path = writeCheckpoint(dir);
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.isOk()) << f.message();
  // The same size, other bytes, written into the same file (not renamed);
  // the modification time is set apart explicitly, as a clock tick might
  // not have passed.
  std::string other = readBytes(writeCheckpoint(dir, 7, "other.safetensors"));
  ASSERT_EQ(other.size(), (*f)->fileSize());
  writeBytes(path, other); // truncates and rewrites the same inode
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  times[1].tv_sec += 5;
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  auto t = (*f)->load(*(*f)->find("b"));
  ASSERT_FALSE(t.isOk());
  EXPECT_ERROR(t.message(), ("'" + path + "' changed while in use"),
               "modified after it was opened", "may mix old and new bytes",
               "cannot read tensor 'b'");
}

TEST(CheckpointChange, ReplacedThroughARenameReadsTheOpenedFile) {
  TempDir dir("ckpt-rename");
  std::string path = writeCheckpoint(dir);
  HostTensor before;
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.isOk()) << f.message();
  before = (*f)->tensor(*(*f)->find("a")).clone();
  // writeSafetensors writes a temporary file and renames it over `path`.
  writeCheckpoint(dir, 9);
  auto t = (*f)->load(*(*f)->find("a"));
  ASSERT_TRUE(t.isOk()) << t.message();
  EXPECT_TRUE(sameBytes(*t, before));
}
