//===- DecodeTest.cpp - Image decoding errors -----------------------------===//

#include "trellis/Image/Image.h"

#include <gtest/gtest.h>

#include <string>

using namespace trellis;

namespace {

std::string pngHeader(uint32_t w, uint32_t h, uint8_t depth, uint8_t type) {
  std::string s("\x89PNG\r\n\x1a\n", 8);
  s += std::string("\0\0\0\x0d", 4) + "IHDR";
  for (uint32_t v : {w, h})
    for (int shift = 24; shift >= 0; shift -= 8)
      s += char((v >> shift) & 0xff);
  s += char(depth);
  s += char(type);
  s += std::string(3, '\0');
  s += std::string(4, '\0'); // CRC (not checked before libpng)
  return s;
}

std::string decodeError(const std::string &bytes) {
  auto r = decodeImage(bytes.data(), bytes.size(), "img");
  return r.isOk() ? std::string("ok") : r.message();
}

TEST(Decode, NamedErrors) {
  EXPECT_NE(decodeError("").find("img: the file is empty"), std::string::npos);
  EXPECT_NE(decodeError("BM....").find("not a PNG or JPEG"), std::string::npos);
  EXPECT_NE(decodeError(pngHeader(0, 5, 8, 6)).find("0 x 5 pixels"),
            std::string::npos);
  EXPECT_NE(decodeError(pngHeader(20000, 20000, 8, 6))
                .find("larger than the limit of 16384 pixels a side"),
            std::string::npos);
  EXPECT_NE(decodeError(pngHeader(4, 4, 16, 6)).find("16-bit PNG"),
            std::string::npos);
  EXPECT_NE(decodeError(pngHeader(4, 4, 8, 6)).find("truncated or corrupt PNG"),
            std::string::npos);
  EXPECT_NE(decodeError(pngHeader(4, 4, 8, 6).substr(0, 20))
                .find("truncated or corrupt PNG"),
            std::string::npos);
  EXPECT_NE(decodeError("\xff\xd8\xff\xe0").find("truncated or corrupt JPEG"),
            std::string::npos);
}

TEST(Decode, SizeLimits) {
  EXPECT_TRUE(checkImageSize(kMaxImageSide, 1, "a").isOk());
  EXPECT_FALSE(checkImageSize(kMaxImageSide + 1, 1, "a").isOk());
  EXPECT_TRUE(checkImageSize(16384, 8192, "a").isOk()); // exactly 2^27
  EXPECT_FALSE(checkImageSize(16384, 8193, "a").isOk());
}

} // namespace
