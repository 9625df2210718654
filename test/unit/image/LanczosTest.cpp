//===- LanczosTest.cpp - Pillow's LANCZOS weights and small resizes -------===//

#include "trellis/Image/Lanczos.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

using namespace trellis;

namespace {

// A 5 x 3 greyscale image and what Pillow 9.4 gives for
// Image.fromarray(a, 'L').resize(size, Image.LANCZOS).
const uint8_t kSource[3 * 5] = {0, 50,  100, 150, 200, 255, 0, 255,
                                0, 255, 10,  20,  30,  40,  50};

std::vector<uint8_t> resize(int64_t w, int64_t h) {
  return resizeLanczos(kSource, 5, 3, 1, w, h);
}

TEST(Lanczos, MatchesPillowUpAndDown) {
  EXPECT_EQ(resize(7, 2),
            (std::vector<uint8_t>{106, 50, 63, 170, 105, 148, 236, 113, 44, 31,
                                  119, 35, 52, 125}));
  EXPECT_EQ(resize(2, 5),
            (std::vector<uint8_t>{25, 159, 85, 163, 140, 140, 68, 72, 2, 32}));
  EXPECT_EQ(resize(3, 3),
            (std::vector<uint8_t>{16, 100, 184, 154, 114, 154, 13, 30, 47}));
}

TEST(Lanczos, SameSizeIsACopy) {
  EXPECT_EQ(resize(5, 3), std::vector<uint8_t>(kSource, kSource + 15));
}

TEST(Lanczos, UpsamplingHasSixTapsInside) {
  LanczosAxis axis = lanczosAxis(10, 40); // scale 0.25: plain Lanczos-3
  EXPECT_EQ(axis.stride, 7);              // ceil(3) * 2 + 1
  EXPECT_EQ(axis.count[20], 6);
  EXPECT_EQ(axis.first[20], 2); // centre 5.125: taps 2..7
  EXPECT_EQ(axis.count[0], 3);  // clamped at the left edge: taps 0..2
  EXPECT_EQ(axis.first[0], 0);
}

TEST(Lanczos, DownsamplingWidensTheKernel) {
  LanczosAxis axis = lanczosAxis(300, 100); // scale 3: support 9
  EXPECT_EQ(axis.stride, 19);
  EXPECT_EQ(axis.count[50], 18);
}

TEST(Lanczos, WeightsAreNormalisedThenQuantised) {
  for (auto [in, out] : {std::pair<int64_t, int64_t>{7, 518},
                         {1226, 518},
                         {518, 518},
                         {13, 5}}) {
    LanczosAxis axis = lanczosAxis(in, out);
    for (int64_t i = 0; i < out; ++i) {
      int64_t first = 0;
      std::vector<double> w = lanczosDoubleWeights(in, out, i, first);
      ASSERT_EQ(first, axis.first[size_t(i)]);
      ASSERT_EQ(int64_t(w.size()), axis.count[size_t(i)]);
      double sum = std::accumulate(w.begin(), w.end(), 0.0);
      EXPECT_NEAR(sum, 1.0, 1e-12);
      int64_t qsum = 0;
      for (size_t j = 0; j < w.size(); ++j) {
        int32_t q = axis.weights[size_t(i * axis.stride) + j];
        EXPECT_EQ(q, int32_t(std::lround(w[j] * (1 << 22)))) << i << " " << j;
        qsum += q;
      }
      EXPECT_LE(std::abs(qsum - (int64_t(1) << 22)), int64_t(w.size()));
    }
  }
}

TEST(Lanczos, HalfPixelPhaseIsSymmetric) {
  // Upsampling 4 -> 8: output 0 and 7 are mirror images.
  LanczosAxis axis = lanczosAxis(4, 8);
  for (int64_t j = 0; j < axis.count[0]; ++j)
    EXPECT_EQ(axis.weights[size_t(j)],
              axis.weights[size_t(7 * axis.stride + axis.count[7] - 1 - j)]);
}

TEST(Lanczos, ConstantStaysConstant) {
  std::vector<uint8_t> flat(37 * 23 * 4, 77);
  for (auto [w, h] : {std::pair<int64_t, int64_t>{518, 518}, {5, 9}, {37, 2}})
    for (uint8_t v : resizeLanczos(flat.data(), 37, 23, 4, w, h))
      ASSERT_EQ(v, 77);
}

TEST(Lanczos, EmptyInputGivesZeros) {
  // Pillow resizes a 0 x 0 crop to black (no taps, 2^21 >> 22 = 0).
  std::vector<uint8_t> out = resizeLanczos(nullptr, 0, 0, 4, 6, 6);
  EXPECT_EQ(out, std::vector<uint8_t>(6 * 6 * 4, 0));
}

} // namespace
