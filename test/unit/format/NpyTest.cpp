//===- NpyTest.cpp - .npy reader and writer -------------------------------===//
#include "trellis/Format/Npy.h"

#include "test/unit/format/TestUtil.h"

#include <gtest/gtest.h>

using namespace trellis;
using namespace trellis::test;

namespace {

/// A .npy v1.0 image with the given header text (not padded) and data.
std::string npyV1(const std::string &header, const std::string &data) {
  std::string s = "\x93NUMPY\x01";
  s += '\0';
  s += char(header.size() & 0xff);
  s += char(header.size() >> 8);
  return s + header + data;
}

Result<HostTensor> parse(const std::string &bytes) {
  return parseNpy(bytes.data(), bytes.size(), "t.npy");
}

} // namespace

// Byte-for-byte what numpy 1.24's np.save writes for these arrays.
TEST(NpyWriter, HeaderMatchesNumPy) {
  auto pad = [](std::string dict) {
    dict.resize(127 - 10, ' ');
    return std::string("\x93NUMPY\x01\x00v\x00", 10) + dict + "\n";
  };
  struct Case {
    DType dtype;
    Shape shape;
    const char *dict;
  } cases[] = {
      {DType::F32,
       {2, 3},
       "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"},
      {DType::I64,
       {},
       "{'descr': '<i8', 'fortran_order': False, 'shape': (), }"},
      {DType::U8,
       {5},
       "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }"},
      {DType::F16,
       {1374, 1024},
       "{'descr': '<f2', 'fortran_order': False, 'shape': (1374, 1024), }"},
      {DType::Bool,
       {0},
       "{'descr': '|b1', 'fortran_order': False, 'shape': (0,), }"},
  };
  for (const auto &c : cases) {
    auto h = npyHeader(c.dtype, c.shape);
    ASSERT_TRUE(h.isOk()) << h.message();
    EXPECT_EQ(*h, pad(c.dict)) << c.dict;
  }
  auto descr = npyDescr(DType::I8);
  ASSERT_TRUE(descr.isOk());
  EXPECT_EQ(*descr, "|i1");
}

TEST(NpyWriter, HeaderGrowsInSteps64) {
  // 40 dims of 1: the dict outgrows 128 bytes.
  Shape shape(40, 1);
  auto h = npyHeader(DType::F32, shape);
  ASSERT_TRUE(h.isOk());
  EXPECT_EQ(h->size() % 64, 0u);
  EXPECT_GT(h->size(), 128u);
  EXPECT_EQ(h->back(), '\n');
  auto t = parse(*h + std::string(4, '\0'));
  ASSERT_TRUE(t.isOk()) << t.message();
  EXPECT_EQ(t->shape(), shape);
}

TEST(NpyRoundTrip, EveryDTypeAndShape) {
  TempDir dir("npy-rt");
  std::vector<Shape> shapes = {{}, {0}, {7}, {2, 3}, {2, 0, 3}, {3, 1, 4, 2}};
  unsigned seed = 0;
  for (DType dt : kAllDTypes) {
    if (dt == DType::BF16)
      continue;
    for (const Shape &shape : shapes) {
      std::string path = dir.file("a.npy");
      HostTensor t = patternTensor(dt, shape, ++seed);
      ASSERT_TRUE(writeNpy(path, t).isOk());
      auto back = readNpy(path);
      ASSERT_TRUE(back.isOk()) << back.message();
      EXPECT_TRUE(sameBytes(*back, t))
          << dtypeName(dt) << " " << shapeToString(shape);
      EXPECT_FALSE(back->isReadOnly());
      auto h = npyHeader(dt, shape);
      EXPECT_EQ(readBytes(path).size(), h->size() + t.nbytes());
    }
  }
}

TEST(NpyWriter, RefusesBF16AndBadPaths) {
  TempDir dir("npy-bad");
  Status st = writeNpy(dir.file("b.npy"), HostTensor(DType::BF16, {2}));
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("BF16 has no NumPy equivalent"),
            std::string::npos)
      << st.message();
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  st = writeNpy("/nonexistent-dir/x.npy", HostTensor(DType::F32, {2}));
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("/nonexistent-dir/x.npy"), std::string::npos);
}

TEST(NpyReader, Versions2And3) {
  // np.lib.format.write_array(f, np.arange(3, dtype='<i4'), version=(2|3, 0))
  std::string dict =
      "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }";
  dict.resize(115, ' ');
  dict += '\n';
  std::string data("\0\0\0\0\1\0\0\0\2\0\0\0", 12);
  for (char version : {'\x02', '\x03'}) {
    std::string bytes = std::string("\x93NUMPY", 6) + version + '\0' +
                        std::string("t\0\0\0", 4) + dict + data;
    auto t = parse(bytes);
    ASSERT_TRUE(t.isOk()) << t.message();
    EXPECT_EQ(t->dtype(), DType::I32);
    EXPECT_EQ(t->shape(), Shape{3});
    EXPECT_EQ(t->data<int32_t>()[2], 2);
  }
}

TEST(NpyReader, AcceptsEveryValidSpelling) {
  std::string four(4, '\0');
  struct Case {
    const char *header;
    DType dtype;
    Shape shape;
  } cases[] = {
      // key order, quotes, whitespace, no trailing comma
      {"{\"shape\":(1,),\"fortran_order\":False,\"descr\":\"<f4\"}",
       DType::F32,
       {1}},
      {"  {'descr':'<i4' ,\n 'fortran_order' : False,'shape':( 1 , 1 , )}\n",
       DType::I32,
       {1, 1}},
      // one-byte types: any byte-order mark, as NumPy accepts
      {"{'descr': '<u1', 'fortran_order': False, 'shape': (4,), }",
       DType::U8,
       {4}},
      {"{'descr': '>i1', 'fortran_order': False, 'shape': (4,), }",
       DType::I8,
       {4}},
      {"{'descr': 'b1', 'fortran_order': False, 'shape': (2, 2), }",
       DType::Bool,
       {2, 2}},
      // Python 2 long suffix (versions 1.0 and 2.0)
      {"{'descr': '<i2', 'fortran_order': False, 'shape': (2L,), }",
       DType::I16,
       {2}},
      // old 16-byte alignment
      {"{'descr': '<f2', 'fortran_order': False, 'shape': (2,)}    \n",
       DType::F16,
       {2}},
  };
  for (const auto &c : cases) {
    auto t = parse(npyV1(c.header, four));
    ASSERT_TRUE(t.isOk()) << c.header << ": " << t.message();
    EXPECT_EQ(t->dtype(), c.dtype) << c.header;
    EXPECT_EQ(t->shape(), c.shape) << c.header;
  }
}
