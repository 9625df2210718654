//===- Decode.cpp - Image files: format detection and size limits ---------===//
//
// Reads a file, recognises PNG and JPEG by their signatures and hands the
// bytes to PngDecoder.cpp or JpegDecoder.cpp.
//
//===----------------------------------------------------------------------===//
#include "trellis/Image/Image.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace trellis {

Status checkImageSize(int64_t width, int64_t height, const std::string &what) {
  std::string size = std::to_string(width) + " x " + std::to_string(height);
  if (width <= 0 || height <= 0)
    return Error{what + ": the image is " + size +
                 " pixels (an empty image); expected at least 1 x 1"};
  if (width > kMaxImageSide || height > kMaxImageSide)
    return Error{
        what + ": the image is " + size + " pixels, larger than the limit of " +
        std::to_string(kMaxImageSide) + " pixels a side; resize it first"};
  if (width * height > kMaxImagePixels)
    return Error{what + ": the image is " + size + " pixels (" +
                 std::to_string(width * height) +
                 " in all), more than the limit of " +
                 std::to_string(kMaxImagePixels) + " pixels; resize it first"};
  return Status::ok();
}

Result<RgbaImage> imageFromPixels(const uint8_t *pixels, int64_t height,
                                  int64_t width, int64_t channels,
                                  const std::string &what) {
  if (channels != 3 && channels != 4)
    return Error{what +
                 ": expected uint8 [height, width, 4] (RGBA) or "
                 "[height, width, 3] (RGB), found " +
                 std::to_string(channels) + " channels"};
  TRELLIS_RETURN_IF_ERROR(checkImageSize(width, height, what));
  if (!pixels)
    return Error{what + ": the pixel data is NULL"};
  RgbaImage image;
  image.width = width;
  image.height = height;
  image.hasAlpha = channels == 4;
  const size_t n = size_t(width * height);
  if (channels == 4) {
    image.pixels.assign(pixels, pixels + n * 4);
    return image;
  }
  image.pixels.resize(n * 4);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(&image.pixels[i * 4], pixels + i * 3, 3);
    image.pixels[i * 4 + 3] = 255;
  }
  return image;
}

Result<RgbaImage> decodeImage(const void *data, size_t size,
                              const std::string &what) {
  static constexpr unsigned char kPng[8] = {0x89, 'P',  'N',  'G',
                                            '\r', '\n', 0x1a, '\n'};
  static constexpr unsigned char kJpeg[3] = {0xff, 0xd8, 0xff};
  const auto *bytes = static_cast<const unsigned char *>(data);
  if (size == 0)
    return Error{what + ": the file is empty; expected a PNG or JPEG image"};
  if (size >= sizeof(kPng) && std::memcmp(bytes, kPng, sizeof(kPng)) == 0)
    return decodePng(data, size, what);
  if (size >= sizeof(kJpeg) && std::memcmp(bytes, kJpeg, sizeof(kJpeg)) == 0)
    return decodeJpeg(data, size, what);
  return Error{what +
               ": not a PNG or JPEG file (the first bytes match neither "
               "signature); the supported image formats are PNG and JPEG"};
}

Result<RgbaImage> readImageFile(const std::string &path) {
  std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "rb"),
                                           &std::fclose);
  if (!f)
    return Error{path + ": cannot open the image: " + std::strerror(errno)};
  std::vector<unsigned char> bytes;
  unsigned char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0)
    bytes.insert(bytes.end(), buf, buf + n);
  if (std::ferror(f.get()))
    return Error{path + ": cannot read the image: " + std::strerror(errno)};
  return decodeImage(bytes.data(), bytes.size(), path);
}

} // namespace trellis
