#include "trellis/Output/RadianceField.h"

#include "trellis/Format/Npy.h"

#include "test/unit/output/TestMeshes.h"

#include <cstring>
#include <filesystem>
#include <gtest/gtest.h>

using namespace trellis;
using namespace trellis::output;
using trellis::output::fixtures::TempDir;
namespace fs = std::filesystem;

namespace {

HostTensor coordsOf(const std::vector<std::array<int32_t, 4>> &c) {
  HostTensor t(DType::I32, {int64_t(c.size()), 4});
  std::memcpy(t.mutableRaw(), c.data(), c.size() * 16);
  return t;
}

// Head row i, channel k holds 1000 i + k.
HostTensor headFor(int64_t n) {
  HostTensor h(DType::F32, {n, kRfHeadChannels});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < kRfHeadChannels; ++k)
      h.mutableData<float>()[i * kRfHeadChannels + k] = float(1000 * i + k);
  return h;
}

} // namespace

TEST(RadianceField, SplitsTheHeadAndAddsOne) {
  auto rf = radianceFieldFromHead(coordsOf({{0, 1, 2, 3}, {0, 63, 0, 5}}),
                                  headFor(2));
  ASSERT_TRUE(rf.isOk()) << rf.message();
  const float *t = rf->trivec.data<float>();
  // trivec[i][r][a][d] = channel r*24 + a*8 + d, plus 1.
  EXPECT_EQ(t[0], 1.0f);
  EXPECT_EQ(t[(5 * 3 + 2) * 8 + 7], float(5 * 24 + 2 * 8 + 7) + 1.0f);
  EXPECT_EQ(t[384 + 0], 1000.0f + 1.0f);
  // density[i][r] = channel 384 + r; features_dc[i][r][0][c] = 400 + 3r + c.
  EXPECT_EQ(rf->density.data<float>()[15], 399.0f);
  EXPECT_EQ(rf->density.data<float>()[16], 1384.0f);
  EXPECT_EQ(rf->featuresDc.data<float>()[3 * 7 + 2], 400.0f + 21 + 2);
  EXPECT_EQ(rf->featuresDc.data<float>()[48], 1400.0f);
  HostTensor pos = radianceFieldPositions(rf.value());
  EXPECT_EQ(pos.shape(), (Shape{2, 3}));
  EXPECT_EQ(pos.data<float>()[0], 1.5f / 64);
  EXPECT_EQ(pos.data<float>()[3], 63.5f / 64);
  EXPECT_EQ(pos.data<float>()[5], 5.5f / 64);
}

TEST(RadianceField, NpzKeysDtypesShapes) {
  auto rf = radianceFieldFromHead(
      coordsOf({{0, 1, 2, 3}, {0, 4, 5, 6}, {0, 7, 8, 9}}), headFor(3));
  ASSERT_TRUE(rf.isOk());
  TempDir tmp("rf");
  const fs::path &dir = tmp.path();
  fs::path npz = dir / "rf.npz";
  ASSERT_TRUE(writeRadianceFieldNpz(npz.string(), rf.value()).isOk());
  auto read = readNpz(npz.string());
  ASSERT_TRUE(read.isOk()) << read.message();
  struct Want {
    const char *key;
    DType dtype;
    Shape shape;
  };
  const Want want[] = {{"coords", DType::I32, {3, 4}},
                       {"position", DType::F32, {3, 3}},
                       {"depth", DType::U8, {3, 1}},
                       {"trivec", DType::F32, {3, 16, 3, 8}},
                       {"density", DType::F32, {3, 16}},
                       {"features_dc", DType::F32, {3, 16, 1, 3}},
                       {"aabb", DType::F32, {6}}};
  ASSERT_EQ(read->size(), 7u);
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ((*read)[i].first, want[i].key);
    EXPECT_EQ((*read)[i].second.dtype(), want[i].dtype) << want[i].key;
    EXPECT_EQ((*read)[i].second.shape(), want[i].shape) << want[i].key;
  }
  EXPECT_EQ((*read)[2].second.data<uint8_t>()[2], 6);
  EXPECT_EQ((*read)[6].second.data<float>()[0], -0.5f);
  EXPECT_EQ((*read)[6].second.data<float>()[5], 1.0f);
  EXPECT_EQ(std::memcmp((*read)[3].second.raw(), rf->trivec.raw(),
                        rf->trivec.nbytes()),
            0);
}

TEST(RadianceField, Errors) {
  auto bad = radianceFieldFromHead(coordsOf({{0, 1, 2, 3}}),
                                   HostTensor(DType::F32, {1, 447}));
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("[1, 448]"), std::string::npos) << bad.message();
  auto out = radianceFieldFromHead(coordsOf({{0, 1, 64, 3}}), headFor(1));
  ASSERT_FALSE(out.isOk());
  EXPECT_NE(out.message().find("outside the 64^3 grid"), std::string::npos)
      << out.message();
  auto rf = radianceFieldFromHead(coordsOf({{0, 1, 2, 3}}), headFor(1));
  ASSERT_TRUE(rf.isOk());
  rf->resolution = 48;
  Status s = writeRadianceFieldNpz("/tmp/never-written-rf.npz", rf.value());
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("never-written-rf.npz"), std::string::npos);
  EXPECT_NE(s.message().find("power of two"), std::string::npos);
}
