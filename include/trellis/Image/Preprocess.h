//===- Preprocess.h - TRELLIS's image preprocessing -----------------------===//
//
// TrellisImageTo3DPipeline.preprocess_image and the tensor conversion of
// encode_image, bit for bit (shared/spec/TRELLIS-v1-image-conditioning.md
// §1.2-§1.6, §5.3):
//
// 1. Alpha is trusted iff the image has an alpha channel (RgbaImage::hasAlpha)
//    and some alpha value is not 255. Otherwise TRELLIS would remove the
//    background with rembg, which we do not ship: that is an error naming
//    --no-background-removal, unless PreprocessOptions::noBackgroundRemoval
//    is set (see below).
// 2. The foreground is every pixel with alpha >= 205 (alpha > 0.8 * 255); its
//    bounding box [x0, x1] x [y0, y1] (inclusive) gives the centre
//    ((x0 + x1) / 2, (y0 + y1) / 2), the extent e = max(x1 - x0, y1 - y0),
//    s = int(e * 1.2) and h = s / 2; the crop box (cx - h, cy - h, cx + h,
//    cy + h) is rounded half to even and not clamped (outside: transparent
//    black). No foreground pixel is an error (TRELLIS crashes there).
// 3. The crop is resized to 518 x 518 as Pillow resizes RGBA: premultiplied
//    (integer), Lanczos (Lanczos.h), un-premultiplied (integer); a crop that
//    is already 518 x 518 is copied unchanged.
// 4. Premultiplied onto black in float32: out = trunc(((c / 255) * (a / 255))
//    * 255), giving the 518 x 518 uint8 RGB image DINOv2 sees.
// 5. normalizeImage: x = u8 / 255, (x - mean) / std per channel (ImageNet),
//    float32, [3, 518, 518].
//
// --no-background-removal (our choice; TRELLIS has no such option): an image
// without trusted alpha is processed as if the background remover had kept
// every pixel, i.e. as TRELLIS's rembg path with a mask of 255 everywhere:
// the colours are kept (any alpha the file had is dropped, as TRELLIS's
// convert('RGB') drops it), an image larger than 1024 on its longer side is
// first resized with Lanczos to (int(W * s), int(H * s)), s = 1024 / max(W, H)
// (float64, truncation, §6.2), and the foreground is then the whole image, so
// the crop is the whole image plus the 20 % margin in transparent black.
// EXIF orientation (which rembg would apply) is not. Images with trusted alpha
// are processed the same with or without the option.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_IMAGE_PREPROCESS_H
#define TRELLIS_IMAGE_PREPROCESS_H

#include "trellis/Image/Image.h"
#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

/// The side of the square image DINOv2 is given.
constexpr int64_t kCondImageSize = 518;
/// The longer side TRELLIS caps an image to before background removal.
constexpr int64_t kBackgroundRemovalMaxSide = 1024;

struct PreprocessOptions {
  /// Accept an image without trusted alpha as it is (see the file comment).
  bool noBackgroundRemoval = false;
  /// How the caller turns noBackgroundRemoval on, for the error message.
  std::string noBackgroundRemovalOption = "pass --no-background-removal";
};

/// A crop rectangle in image coordinates (may extend past the image).
struct CropBox {
  int64_t left = 0;
  int64_t top = 0;
  int64_t width = 0;
  int64_t height = 0;
};

struct PreprocessedImage {
  /// kCondImageSize x kCondImageSize x 3 bytes (HWC), black background.
  std::vector<uint8_t> rgb;
  /// The file's alpha channel was used (false: --no-background-removal).
  bool alphaTrusted = false;
  /// The size the crop was taken from (the image, or its 1024 cap).
  int64_t sourceWidth = 0;
  int64_t sourceHeight = 0;
  CropBox crop;
};

/// TRELLIS's rule: an alpha channel with some value other than 255.
bool alphaIsTrusted(const RgbaImage &image);

/// The crop box around the pixels with alpha >= 205; an error naming
/// `whatForErrors` when there is none.
Result<CropBox> foregroundCropBox(const RgbaImage &image,
                                  const std::string &whatForErrors);

/// Pillow's image.crop(box).resize((size, size), LANCZOS) on RGBA: outside
/// pixels transparent black, premultiplied resize. size * size * 4 bytes.
std::vector<uint8_t> cropAndResizeRgba(const RgbaImage &image,
                                       const CropBox &box, int64_t size);

/// §1.5: RGBA (n pixels) to RGB premultiplied onto black in float32,
/// truncated.
std::vector<uint8_t> premultiplyOntoBlack(const std::vector<uint8_t> &rgba);

/// The whole preprocessing, from a decoded image to the 518 x 518 RGB image.
Result<PreprocessedImage> preprocessImage(const RgbaImage &image,
                                          const PreprocessOptions &options,
                                          const std::string &whatForErrors);

/// §1.6: a size x size x 3 uint8 image to the float32 [3, size, size] tensor
/// (x / 255 - mean) / std with ImageNet's mean and std.
HostTensor normalizeImage(const uint8_t *rgb, int64_t size);

/// The images of one generation, as the image-conditioning model takes them.
struct ConditioningImages {
  HostTensor normalized; ///< f32 [N, 3, 518, 518]
  HostTensor rgb;        ///< u8 [N, 518, 518, 3] (cond_image.npy)
};
/// preprocessImage and normalizeImage of each image; `names[i]` names image
/// i in errors.
Result<ConditioningImages>
prepareConditioningImages(const std::vector<RgbaImage> &images,
                          const std::vector<std::string> &names,
                          const PreprocessOptions &options);

} // namespace trellis

#endif // TRELLIS_IMAGE_PREPROCESS_H
