#include "trellis/Support/Half.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace trellis;

TEST(Half, KnownValues) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);               // rounds to inf
  EXPECT_EQ(floatToHalf(5.960464477539063e-08f), 0x0001); // smallest subnormal
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
}

TEST(Half, TiesToEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: rounds to even (1).
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3·2^-11 is halfway between 1+2^-10 and 1+2^-9: rounds to 1+2^-9.
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
}

TEST(Half, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t bits = uint16_t(h);
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff)) // nan payloads
      continue;
    ASSERT_EQ(floatToHalf(halfToFloat(bits)), bits) << "bits " << h;
  }
}
