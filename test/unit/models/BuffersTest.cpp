//===- BuffersTest.cpp - pos_emb (APE) and offset_perturbation ------------===//

#include "trellis/Models/Buffers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace trellis::models;

namespace {

TEST(Buffers, ApeFrequencyCounts) {
  // spec Appendix B
  EXPECT_EQ(apeFrequencies(1024), 170);
  EXPECT_EQ(apeFrequencies(768), 128);
  EXPECT_EQ(apeFrequencies(1280), 213);
  EXPECT_EQ(apeFrequencies(128), 21);
}

TEST(Buffers, ApeIsSinThenCosPerAxisWithZeroPadding) {
  const int64_t c = 1024, f = 170;
  std::vector<float> row(c);
  absolutePositionEmbedding(3, 7, 11, c, row.data());
  const int64_t pos[3] = {3, 7, 11};
  for (int axis = 0; axis < 3; ++axis)
    for (int64_t j = 0; j < f; ++j) {
      double w = std::pow(10000.0, -double(j) / double(f));
      EXPECT_NEAR(row[axis * 2 * f + j], std::sin(pos[axis] * w), 2e-6)
          << "axis " << axis << " j " << j;
      EXPECT_NEAR(row[axis * 2 * f + f + j], std::cos(pos[axis] * w), 2e-6)
          << "axis " << axis << " j " << j;
    }
  for (int64_t k = 6 * f; k < c; ++k)
    EXPECT_EQ(row[k], 0.0f); // 4 zeros of padding
}

TEST(Buffers, PositionGridIsIMajor) {
  const int64_t side = 16, c = 1024;
  std::vector<float> grid(side * side * side * c);
  fillPositionEmbeddingGrid(side, c, grid.data());
  // Row 0: sin(0) = 0, cos(0) = 1.
  EXPECT_EQ(grid[0], 0.0f);
  EXPECT_EQ(grid[170], 1.0f);
  // Row n = 256 i + 16 j + k holds APE(i, j, k).
  std::vector<float> row(c);
  absolutePositionEmbedding(5, 2, 9, c, row.data());
  int64_t n = 256 * 5 + 16 * 2 + 9;
  for (int64_t k = 0; k < c; ++k)
    ASSERT_EQ(grid[n * c + k], row[k]) << k;
}

TEST(Buffers, OffsetPerturbationMatchesAppendixB) {
  std::vector<float> p(32 * 3);
  fillOffsetPerturbation(32, 1.5, p.data());
  const double expected[4][3] = {{-0.80472, -0.80472, -0.80472},
                                 {-0.73317, 0.00000, -0.22599},
                                 {-0.66750, -0.34657, 0.22599},
                                 {-0.60651, 0.34657, -0.57431}};
  for (int g = 0; g < 4; ++g)
    for (int a = 0; a < 3; ++a)
      EXPECT_NEAR(p[g * 3 + a], expected[g][a], 6e-6) << g << "," << a;
  // Every value is finite: |2h - 1| / 1.5 < 1.
  for (float v : p)
    EXPECT_TRUE(std::isfinite(v));
}

TEST(Buffers, RadicalInverse) {
  EXPECT_DOUBLE_EQ(radicalInverse(2, 1), 0.5);
  EXPECT_DOUBLE_EQ(radicalInverse(2, 6), 0.375);
  EXPECT_DOUBLE_EQ(radicalInverse(3, 1), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(radicalInverse(3, 5), 2.0 / 3.0 + 1.0 / 9.0);
  EXPECT_DOUBLE_EQ(radicalInverse(2, 0), 0.0);
}

} // namespace
