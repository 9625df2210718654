//===- Preprocess.cpp - TRELLIS's image preprocessing ---------------------===//
//
// Spec §1.2-§1.5 (TrellisImageTo3DPipeline.preprocess_image) on a decoded
// image. The crop is never materialised: the resize reads it row by row,
// premultiplying on the fly, so a crop larger than the image (it may be 1.2
// times the image's longer side, squared) costs one row of memory.
//
//===----------------------------------------------------------------------===//
#include "trellis/Image/Preprocess.h"
#include "trellis/Image/Lanczos.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace trellis {

namespace {

/// Pillow's MULDIV255: round(c * a / 255), exact for 8-bit pairs.
inline uint8_t mulDiv255(uint32_t c, uint32_t a) {
  uint32_t t = c * a + 128;
  return uint8_t(((t >> 8) + t) >> 8);
}

/// Python's round() on a float64 (half to even), as an integer.
int64_t roundHalfEven(double v) {
  double r = std::nearbyint(v); // the default rounding mode: to nearest even
  return int64_t(r);
}

/// TRELLIS's rembg path with a mask of 255 everywhere (the file comment of
/// Preprocess.h): RGB kept, alpha 255, capped to 1024 on the longer side.
Result<RgbaImage> opaqueForNoBackgroundRemoval(const RgbaImage &image,
                                               const std::string &what) {
  int64_t w = image.width, h = image.height;
  int64_t longer = std::max(w, h);
  RgbaImage out;
  out.hasAlpha = false;
  if (longer <= kBackgroundRemovalMaxSide) {
    out.width = w;
    out.height = h;
    out.pixels = image.pixels;
    for (size_t i = 3; i < out.pixels.size(); i += 4)
      out.pixels[i] = 255;
    return out;
  }
  double s = double(kBackgroundRemovalMaxSide) / double(longer);
  int64_t nw = int64_t(double(w) * s), nh = int64_t(double(h) * s);
  if (nw < 1 || nh < 1)
    return Error{what + ": the image is " + std::to_string(w) + " x " +
                 std::to_string(h) + " pixels; TRELLIS would resize it to " +
                 std::to_string(nw) + " x " + std::to_string(nh) +
                 " before background removal, which Pillow refuses (an "
                 "empty image)"};
  // Pillow resizes the RGB image (no alpha, no premultiplication).
  std::vector<uint8_t> rgb = resizeLanczos(
      w, h, 3,
      [&](int64_t y, uint8_t *row) {
        const uint8_t *src = image.pixel(0, y);
        for (int64_t x = 0; x < w; ++x)
          std::memcpy(row + x * 3, src + x * 4, 3);
      },
      nw, nh);
  out.width = nw;
  out.height = nh;
  out.pixels.resize(size_t(nw * nh * 4));
  for (int64_t i = 0; i < nw * nh; ++i) {
    std::memcpy(&out.pixels[size_t(i * 4)], &rgb[size_t(i * 3)], 3);
    out.pixels[size_t(i * 4 + 3)] = 255;
  }
  return out;
}

} // namespace

bool alphaIsTrusted(const RgbaImage &image) {
  if (!image.hasAlpha)
    return false;
  for (size_t i = 3; i < image.pixels.size(); i += 4)
    if (image.pixels[i] != 255)
      return true;
  return false;
}

Result<CropBox> foregroundCropBox(const RgbaImage &image,
                                  const std::string &what) {
  // alpha > 0.8 * 255 = 204.0, i.e. alpha >= 205.
  constexpr uint8_t kMinForegroundAlpha = 205;
  int64_t x0 = image.width, x1 = -1, y0 = image.height, y1 = -1;
  unsigned maxAlpha = 0;
  for (int64_t y = 0; y < image.height; ++y) {
    const uint8_t *p = image.pixel(0, y);
    for (int64_t x = 0; x < image.width; ++x) {
      uint8_t a = p[x * 4 + 3];
      maxAlpha = std::max<unsigned>(maxAlpha, a);
      if (a < kMinForegroundAlpha)
        continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  }
  if (x1 < 0)
    return Error{what +
                 ": no foreground: no pixel has alpha >= 205 (TRELLIS "
                 "keeps alpha > 0.8 * 255 as the object), the largest "
                 "alpha is " +
                 std::to_string(maxAlpha) +
                 ", so there is nothing to crop around (TRELLIS fails on "
                 "such an image)"};
  double cx = double(x0 + x1) / 2, cy = double(y0 + y1) / 2;
  int64_t extent = std::max(x1 - x0, y1 - y0);
  int64_t s = int64_t(double(extent) * 1.2);
  int64_t half = s / 2;
  int64_t left = roundHalfEven(cx - double(half));
  int64_t top = roundHalfEven(cy - double(half));
  int64_t right = roundHalfEven(cx + double(half));
  int64_t bottom = roundHalfEven(cy + double(half));
  return CropBox{left, top, right - left, bottom - top};
}

std::vector<uint8_t> cropAndResizeRgba(const RgbaImage &image,
                                       const CropBox &box, int64_t size) {
  // Pixel (x, y) of the crop, or transparent black outside the image.
  auto cropRow = [&](int64_t y, uint8_t *row, bool premultiply) {
    std::memset(row, 0, size_t(box.width * 4));
    int64_t sy = box.top + y;
    if (sy < 0 || sy >= image.height)
      return;
    int64_t xBegin = std::max<int64_t>(0, -box.left);
    int64_t xEnd = std::min<int64_t>(box.width, image.width - box.left);
    for (int64_t x = xBegin; x < xEnd; ++x) {
      const uint8_t *src = image.pixel(box.left + x, sy);
      uint8_t *dst = row + x * 4;
      uint8_t a = src[3];
      for (int c = 0; c < 3; ++c)
        dst[c] = premultiply ? mulDiv255(src[c], a) : src[c];
      dst[3] = a;
    }
  };

  // Image.resize returns a copy when the size already matches (before any
  // premultiplication).
  if (box.width == size && box.height == size) {
    std::vector<uint8_t> out(size_t(size * size * 4));
    for (int64_t y = 0; y < size; ++y)
      cropRow(y, out.data() + size_t(y * size * 4), false);
    return out;
  }

  // RGBA -> RGBa, Lanczos, RGBa -> RGBA.
  std::vector<uint8_t> out = resizeLanczos(
      box.width, box.height, 4,
      [&](int64_t y, uint8_t *row) { cropRow(y, row, true); }, size, size);
  for (size_t i = 0; i < out.size(); i += 4) {
    uint32_t a = out[i + 3];
    if (a == 0 || a == 255)
      continue;
    for (int c = 0; c < 3; ++c)
      out[i + c] = uint8_t(std::min<uint32_t>(255, (255 * out[i + c]) / a));
  }
  return out;
}

std::vector<uint8_t> premultiplyOntoBlack(const std::vector<uint8_t> &rgba) {
  size_t n = rgba.size() / 4;
  std::vector<uint8_t> rgb(n * 3);
  for (size_t i = 0; i < n; ++i) {
    // float32 throughout; the divisions are IEEE divisions (no reciprocal).
    float alpha = float(rgba[i * 4 + 3]) / 255.0f;
    for (int c = 0; c < 3; ++c) {
      float r = float(rgba[i * 4 + c]) / 255.0f;
      float v = r * alpha;
      rgb[i * 3 + c] = uint8_t(v * 255.0f); // truncation toward zero
    }
  }
  return rgb;
}

Result<PreprocessedImage> preprocessImage(const RgbaImage &image,
                                          const PreprocessOptions &options,
                                          const std::string &what) {
  PreprocessedImage result;
  result.alphaTrusted = alphaIsTrusted(image);
  const RgbaImage *source = &image;
  RgbaImage opaque;
  if (!result.alphaTrusted) {
    if (!options.noBackgroundRemoval)
      return Error{
          what + ": " +
          (image.hasAlpha ? "the alpha channel is 255 everywhere"
                          : "the image has no alpha channel") +
          ", so TRELLIS would remove the background with a segmentation "
          "network (rembg), which trellisc does not ship; give an image "
          "whose alpha channel marks the object (RGBA PNG with a transparent "
          "background), or " +
          options.noBackgroundRemovalOption +
          " to use the image as it is (the whole image is the object)"};
    TRELLIS_ASSIGN_OR_RETURN(opaque, opaqueForNoBackgroundRemoval(image, what));
    source = &opaque;
  }
  result.sourceWidth = source->width;
  result.sourceHeight = source->height;
  TRELLIS_ASSIGN_OR_RETURN(result.crop, foregroundCropBox(*source, what));
  std::vector<uint8_t> rgba =
      cropAndResizeRgba(*source, result.crop, kCondImageSize);
  result.rgb = premultiplyOntoBlack(rgba);
  return result;
}

} // namespace trellis
