//===- NpzTest.cpp - .npz reader and writer -------------------------------===//
#include "trellis/Format/Npy.h"

#include "test/unit/format/TestUtil.h"

#include <gtest/gtest.h>
#include <zip.h>

using namespace trellis;
using namespace trellis::test;

namespace {

struct Member {
  std::string name;
  int32_t method;
};

/// The members of a zip file as libzip sees them.
std::vector<Member> members(const std::string &path) {
  std::vector<Member> out;
  int err = 0;
  zip_t *za = zip_open(path.c_str(), ZIP_RDONLY, &err);
  if (!za)
    return out;
  for (zip_int64_t i = 0; i < zip_get_num_entries(za, 0); ++i) {
    zip_stat_t st;
    zip_stat_index(za, zip_uint64_t(i), 0, &st);
    out.push_back({st.name, st.comp_method});
  }
  zip_discard(za);
  return out;
}

NamedTensors sample() {
  NamedTensors t;
  unsigned seed = 0;
  for (DType dt : kAllDTypes)
    if (dt != DType::BF16)
      t.push_back({"arr_" + std::string(dtypeName(dt)),
                   patternTensor(dt, {3, 4}, ++seed)});
  t.push_back({"scalar", patternTensor(DType::F64, {}, 99)});
  t.push_back({"empty", patternTensor(DType::F32, {0, 5}, 98)});
  t.push_back({"cond", patternTensor(DType::F32, {1, 1374, 16}, 97)});
  return t;
}

} // namespace

TEST(NpzRoundTrip, StoredAndCompressed) {
  TempDir dir("npz-rt");
  NamedTensors in = sample();
  for (bool compress : {false, true}) {
    std::string path = dir.file(compress ? "c.npz" : "s.npz");
    Status st = writeNpz(path, in, compress);
    ASSERT_TRUE(st.isOk()) << st.message();
    auto out = readNpz(path);
    ASSERT_TRUE(out.isOk()) << out.message();
    ASSERT_EQ(out->size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ((*out)[i].first, in[i].first);
      EXPECT_TRUE(sameBytes((*out)[i].second, in[i].second)) << in[i].first;
    }
    auto ms = members(path);
    ASSERT_EQ(ms.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ(ms[i].name, in[i].first + ".npy");
      EXPECT_EQ(ms[i].method, compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE);
    }
  }
}

TEST(NpzWriter, DeterministicBytes) {
  TempDir dir("npz-det");
  NamedTensors in = sample();
  ASSERT_TRUE(writeNpz(dir.file("a.npz"), in, true).isOk());
  ASSERT_TRUE(writeNpz(dir.file("b.npz"), in, true).isOk());
  EXPECT_EQ(readBytes(dir.file("a.npz")), readBytes(dir.file("b.npz")));
}

TEST(NpzRoundTrip, EmptyArchive) {
  TempDir dir("npz-empty");
  std::string path = dir.file("e.npz");
  ASSERT_TRUE(writeNpz(path, {}, false).isOk());
  // What numpy.savez writes with no arrays: the bare end record.
  EXPECT_EQ(readBytes(path),
            std::string("PK\x05\x06", 4) + std::string(18, '\0'));
  auto out = readNpz(path);
  ASSERT_TRUE(out.isOk()) << out.message();
  EXPECT_TRUE(out->empty());
}

TEST(NpzRoundTrip, HighlyCompressibleData) {
  // 8 MB of zeros deflate ~1000:1, close to deflate's limit; the reader's
  // zip-bomb bound must still accept it.
  TempDir dir("npz-zeros");
  std::string path = dir.file("z.npz");
  NamedTensors in = {{"zeros", HostTensor(DType::F32, {2048, 1024})}};
  ASSERT_TRUE(writeNpz(path, in, true).isOk());
  auto out = readNpz(path);
  ASSERT_TRUE(out.isOk()) << out.message();
  EXPECT_TRUE(sameBytes((*out)[0].second, in[0].second));
  EXPECT_LT(readBytes(path).size(), 20000u);
}

TEST(NpzWriter, RefusesBadEntries) {
  TempDir dir("npz-bad");
  std::string path = dir.file("bad.npz");
  HostTensor t(DType::F32, {2});
  struct Case {
    NamedTensors entries;
    const char *message;
  } cases[] = {
      {{{"a", t}, {"a", t}}, "array 'a': the key appears twice"},
      {{{"", t}}, "empty key"},
      {{{"b", HostTensor(DType::BF16, {2})}}, "BF16 has no NumPy equivalent"},
      {{{"bad\xff", t}}, "not valid UTF-8"},
  };
  for (const auto &c : cases) {
    Status st = writeNpz(path, c.entries, true);
    ASSERT_FALSE(st.isOk()) << c.message;
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
    EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  }
}
