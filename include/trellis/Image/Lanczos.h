//===- Lanczos.h - Pillow's 8-bit LANCZOS resize
//---------------------------===//
//
// Pillow's Image.resize(size, LANCZOS) on 8-bit images, bit for bit
// (shared/spec/TRELLIS-v1-image-conditioning.md §5.2): per axis, Lanczos-3
// weights in double (libm sin), widened by the scale when downsampling,
// normalised by their sum and quantised to 22-bit fixed point; the horizontal
// pass first, stored as uint8, then the vertical pass; an axis whose size does
// not change is not filtered. Channels are filtered independently (RGBA is not
// premultiplied here: see Preprocess.h).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_IMAGE_LANCZOS_H
#define TRELLIS_IMAGE_LANCZOS_H

#include <cstdint>
#include <functional>
#include <vector>

namespace trellis {

/// Fixed-point precision of the quantised weights (Pillow's PRECISION_BITS).
constexpr int kLanczosPrecisionBits = 22;

/// The quantised filter of one axis: output i reads input samples
/// first[i] .. first[i] + count[i] - 1 with weights
/// weights[i * stride .. i * stride + count[i] - 1].
struct LanczosAxis {
  int64_t inSize = 0;
  int64_t outSize = 0;
  int64_t stride = 0;
  std::vector<int64_t> first;
  std::vector<int64_t> count;
  std::vector<int32_t> weights;
};

/// The normalised double weights of one output sample (before
/// quantisation), and the first input index they apply to; for tests.
std::vector<double> lanczosDoubleWeights(int64_t inSize, int64_t outSize,
                                         int64_t outIndex, int64_t &first);

/// The quantised filter mapping inSize samples to outSize (outSize >= 1).
LanczosAxis lanczosAxis(int64_t inSize, int64_t outSize);

/// Fills `row` (inWidth * channels bytes) with input row y.
using RowSource = std::function<void(int64_t y, uint8_t *row)>;

/// Resizes an image given row by row to outWidth x outHeight (both >= 1),
/// `channels` interleaved bytes per pixel; returns outWidth * outHeight *
/// channels bytes. Each input row is requested once, in order.
std::vector<uint8_t> resizeLanczos(int64_t inWidth, int64_t inHeight,
                                   int channels, const RowSource &rows,
                                   int64_t outWidth, int64_t outHeight);

/// Resizes a contiguous image (rows of inWidth * channels bytes).
std::vector<uint8_t> resizeLanczos(const uint8_t *pixels, int64_t inWidth,
                                   int64_t inHeight, int channels,
                                   int64_t outWidth, int64_t outHeight);

} // namespace trellis

#endif // TRELLIS_IMAGE_LANCZOS_H
