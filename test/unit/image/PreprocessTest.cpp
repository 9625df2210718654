//===- PreprocessTest.cpp - The alpha rule, the crop, premultiplication ---===//

#include "trellis/Image/Preprocess.h"

#include <gtest/gtest.h>

using namespace trellis;

namespace {

RgbaImage image(int64_t w, int64_t h, uint8_t alpha, bool hasAlpha = true) {
  RgbaImage im;
  im.width = w;
  im.height = h;
  im.hasAlpha = hasAlpha;
  im.pixels.assign(size_t(w * h * 4), 100);
  for (size_t i = 3; i < im.pixels.size(); i += 4)
    im.pixels[i] = alpha;
  return im;
}

void setAlpha(RgbaImage &im, int64_t x, int64_t y, uint8_t a) {
  im.pixels[size_t((y * im.width + x) * 4 + 3)] = a;
}

TEST(Preprocess, AlphaRule) {
  EXPECT_FALSE(alphaIsTrusted(image(3, 3, 255)));
  EXPECT_TRUE(alphaIsTrusted(image(3, 3, 254)));
  EXPECT_FALSE(alphaIsTrusted(image(3, 3, 0, /*hasAlpha=*/false)));
  RgbaImage im = image(3, 3, 255);
  setAlpha(im, 2, 2, 0);
  EXPECT_TRUE(alphaIsTrusted(im));
}

TEST(Preprocess, CropBoxThresholdAndHalfEven) {
  RgbaImage im = image(50, 70, 204);
  setAlpha(im, 11, 6, 205);
  setAlpha(im, 40, 33, 255);
  auto box = foregroundCropBox(im, "x.png");
  ASSERT_TRUE(box.isOk()) << box.message();
  // centre (25.5, 19.5), extent 29, s = int(34.8) = 34, h = 17:
  // round(8.5) = 8, round(42.5) = 42, round(2.5) = 2, round(36.5) = 36.
  EXPECT_EQ(box->left, 8);
  EXPECT_EQ(box->top, 2);
  EXPECT_EQ(box->width, 34);
  EXPECT_EQ(box->height, 34);
}

TEST(Preprocess, NoForegroundIsAnError) {
  auto box = foregroundCropBox(image(4, 4, 204), "x.png");
  ASSERT_FALSE(box.isOk());
  EXPECT_NE(box.message().find("x.png: no foreground"), std::string::npos);
  EXPECT_NE(box.message().find("largest alpha is 204"), std::string::npos);
}

TEST(Preprocess, NoAlphaNamesTheFlag) {
  auto r = preprocessImage(image(4, 4, 255, false), {}, "x.png");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.message().find("--no-background-removal"), std::string::npos);
  PreprocessOptions options;
  options.noBackgroundRemoval = true;
  auto ok = preprocessImage(image(4, 4, 255, false), options, "x.png");
  ASSERT_TRUE(ok.isOk()) << ok.message();
  EXPECT_FALSE(ok->alphaTrusted);
  EXPECT_EQ(ok->crop.width, 2); // extent 3, int(3.6) = 3, h = 1
}

TEST(Preprocess, SameSizeCropIsCopiedWithoutPremultiplying) {
  // A premultiply round trip would change (100, a=3) to 85; a copy keeps it.
  RgbaImage im = image(518, 518, 3);
  std::vector<uint8_t> out = cropAndResizeRgba(im, {0, 0, 518, 518}, 518);
  EXPECT_EQ(out, im.pixels);
  std::vector<uint8_t> shifted = cropAndResizeRgba(im, {-1, 0, 518, 518}, 518);
  EXPECT_EQ(shifted[0], 0); // transparent black outside
  EXPECT_EQ(shifted[4], 100);
}

TEST(Preprocess, PremultiplyOntoBlackTruncates) {
  // a = 128: c = 255 gives 128 exactly; c = 1 gives 0.50196 -> 0 (rounding
  // would give 1); c = 3 gives 1.50588 -> 1.
  std::vector<uint8_t> rgb = premultiplyOntoBlack({255, 1, 3, 128});
  EXPECT_EQ(rgb, (std::vector<uint8_t>{128, 0, 1}));
  EXPECT_EQ(premultiplyOntoBlack({200, 7, 9, 255}),
            (std::vector<uint8_t>{200, 7, 9}));
}

TEST(Preprocess, NormalizeIsFloat32SubtractThenDivide) {
  std::vector<uint8_t> rgb(2 * 2 * 3, 0);
  rgb[0] = 255;
  HostTensor x = normalizeImage(rgb.data(), 2);
  ASSERT_EQ(x.shape(), (Shape{3, 2, 2}));
  const float *p = x.data<float>();
  float one = 1.0f;
  EXPECT_EQ(p[0], (one - float(0.485)) / float(0.229));
  EXPECT_EQ(p[1], (0.0f - float(0.485)) / float(0.229));
  EXPECT_EQ(p[4], (0.0f - float(0.456)) / float(0.224));
}

} // namespace
