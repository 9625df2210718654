//===- Image.h - Decoded 8-bit images and PNG/JPEG decoding ---------------===//
//
// The images TRELLIS is given (PNG or JPEG files) decoded into 8-bit RGBA, as
// Pillow would open them (shared/spec/TRELLIS-v1-image-conditioning.md §1.2,
// §6.1):
//
// * hasAlpha is true only for a PNG of colour type RGBA (Pillow's mode
//   "RGBA"). Every other colour type is decoded to its RGB colours with alpha
//   255, including LA (grey + alpha), palette + tRNS and RGB/grey + tRNS: their
//   transparency is exactly what TRELLIS's convert('RGB') discards.
// * Grey and palette pixels become RGB as convert('RGB') makes them (grey
//   replicated, bit depths below 8 scaled to 0..255, palette looked up). No
//   gamma, colour profile or EXIF orientation is applied (TRELLIS applies none
//   on the trusted-alpha path).
// * JPEG: libjpeg-turbo with its default decoder settings (as Pillow uses it);
//   greyscale and YCbCr become RGB, CMYK/YCCK are refused. A JPEG never has
//   alpha.
//
// Refused with a message naming the file: files that are neither PNG nor
// JPEG, unreadable, truncated or corrupt files, a width or height of 0,
// 16-bit PNGs (not supported yet), CMYK/YCCK JPEGs, and images larger than
// kMaxImageSide on a side or kMaxImagePixels in all. The size is checked from
// the header, before any pixel memory is allocated.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_IMAGE_IMAGE_H
#define TRELLIS_IMAGE_IMAGE_H

#include "trellis/Support/Result.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

/// The largest width or height accepted.
constexpr int64_t kMaxImageSide = 16384;
/// The most pixels accepted (2^27: 512 MiB as RGBA; below Pillow's own
/// decompression-bomb error at about 1.79e8 pixels).
constexpr int64_t kMaxImagePixels = int64_t(1) << 27;

/// An 8-bit RGBA image, rows top to bottom, 4 bytes per pixel.
struct RgbaImage {
  int64_t width = 0;
  int64_t height = 0;
  /// The file had a real alpha channel (PNG colour type RGBA, Pillow's mode
  /// "RGBA"); when false every alpha byte is 255.
  bool hasAlpha = false;
  std::vector<uint8_t> pixels; ///< width * height * 4 bytes

  const uint8_t *pixel(int64_t x, int64_t y) const {
    return pixels.data() + (y * width + x) * 4;
  }
};

/// Checks a header's size against 0 and the limits; `what` names the file.
Status checkImageSize(int64_t width, int64_t height, const std::string &what);

/// An image from pixels in memory (the C ABI's and Python's images): u8
/// [height, width, channels], rows top to bottom, channels 4 (RGBA: the
/// image has alpha, as a PNG of colour type RGBA) or 3 (RGB, alpha 255).
/// The size limits apply; errors name `whatForErrors`.
Result<RgbaImage> imageFromPixels(const uint8_t *pixels, int64_t height,
                                  int64_t width, int64_t channels,
                                  const std::string &whatForErrors);

/// Decodes a PNG or JPEG held in memory; `whatForErrors` names the source.
Result<RgbaImage> decodeImage(const void *data, size_t size,
                              const std::string &whatForErrors);

/// Reads and decodes a PNG or JPEG file.
Result<RgbaImage> readImageFile(const std::string &path);

/// The decoders behind decodeImage (the data has the format's signature).
Result<RgbaImage> decodePng(const void *data, size_t size,
                            const std::string &whatForErrors);
Result<RgbaImage> decodeJpeg(const void *data, size_t size,
                             const std::string &whatForErrors);

} // namespace trellis

#endif // TRELLIS_IMAGE_IMAGE_H
