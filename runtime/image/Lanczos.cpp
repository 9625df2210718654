//===- Lanczos.cpp - Pillow's 8-bit LANCZOS resize ------------------------===//
//
// Spec §5.2 (Pillow 11.0 src/libImaging/Resample.c, identical in 9.4 for 8
// bits): precompute_coeffs, normalize_coeffs_8bpc and the two 8-bit passes.
// Every floating-point step is written in the order the spec gives, in
// double, with libm's sin: a reordering would move a quantised weight.
//
//===----------------------------------------------------------------------===//
#include "trellis/Image/Lanczos.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace trellis {

namespace {

constexpr double kPi = 3.14159265358979323846; // M_PI

double sincFilter(double x) {
  if (x == 0.0)
    return 1.0;
  x = x * kPi;
  return std::sin(x) / x;
}

/// Lanczos-3: sinc(x) * sinc(x / 3) on [-3, 3).
double lanczosFilter(double x) {
  if (-3.0 <= x && x < 3.0)
    return sincFilter(x) * sincFilter(x / 3);
  return 0.0;
}

constexpr double kSupport = 3.0;

struct AxisGeometry {
  double scale;
  double filterScale;
  double support;
  int64_t kernelSize;
};

AxisGeometry geometry(int64_t inSize, int64_t outSize) {
  AxisGeometry g;
  // The source box [0, inSize] passes through float in Pillow: exact for
  // every size we accept.
  g.scale = (double(float(inSize)) - double(float(0))) / double(outSize);
  g.filterScale = g.scale < 1.0 ? 1.0 : g.scale;
  g.support = kSupport * g.filterScale;
  g.kernelSize = int64_t(std::ceil(g.support)) * 2 + 1;
  return g;
}

/// Unnormalised-then-normalised weights of output `i`; returns the count.
int64_t outputWeights(const AxisGeometry &g, int64_t inSize, int64_t i,
                      double *k, int64_t &first) {
  double center = 0.0 + (double(i) + 0.5) * g.scale;
  double ss = 1.0 / g.filterScale;
  int64_t xmin = int64_t(center - g.support + 0.5);
  if (xmin < 0)
    xmin = 0;
  int64_t xmax = int64_t(center + g.support + 0.5);
  if (xmax > inSize)
    xmax = inSize;
  xmax -= xmin;
  double ww = 0.0;
  for (int64_t x = 0; x < xmax; ++x) {
    double w = lanczosFilter((double(x + xmin) - center + 0.5) * ss);
    k[x] = w;
    ww += w;
  }
  for (int64_t x = 0; x < xmax; ++x)
    if (ww != 0.0)
      k[x] /= ww;
  first = xmin;
  return std::max<int64_t>(xmax, 0);
}

inline uint8_t clip8(int32_t acc) {
  if (acc >= (1 << kLanczosPrecisionBits << 8))
    return 255;
  if (acc <= 0)
    return 0;
  return uint8_t(acc >> kLanczosPrecisionBits);
}

constexpr int32_t kHalf = 1 << (kLanczosPrecisionBits - 1);

} // namespace

std::vector<double> lanczosDoubleWeights(int64_t inSize, int64_t outSize,
                                         int64_t outIndex, int64_t &first) {
  AxisGeometry g = geometry(inSize, outSize);
  std::vector<double> k(size_t(g.kernelSize), 0.0);
  int64_t n = outputWeights(g, inSize, outIndex, k.data(), first);
  k.resize(size_t(n));
  return k;
}

LanczosAxis lanczosAxis(int64_t inSize, int64_t outSize) {
  assert(inSize >= 0 && outSize >= 1);
  AxisGeometry g = geometry(inSize, outSize);
  LanczosAxis axis;
  axis.inSize = inSize;
  axis.outSize = outSize;
  axis.stride = g.kernelSize;
  axis.first.resize(size_t(outSize));
  axis.count.resize(size_t(outSize));
  axis.weights.assign(size_t(outSize * g.kernelSize), 0);
  std::vector<double> k(size_t(g.kernelSize));
  for (int64_t i = 0; i < outSize; ++i) {
    std::fill(k.begin(), k.end(), 0.0);
    int64_t n = outputWeights(g, inSize, i, k.data(), axis.first[size_t(i)]);
    axis.count[size_t(i)] = n;
    int32_t *q = axis.weights.data() + i * g.kernelSize;
    for (int64_t x = 0; x < n; ++x) {
      double scaled = k[size_t(x)] * double(1 << kLanczosPrecisionBits);
      q[x] = k[size_t(x)] < 0 ? int32_t(-0.5 + scaled) : int32_t(0.5 + scaled);
    }
  }
  return axis;
}

std::vector<uint8_t> resizeLanczos(int64_t inWidth, int64_t inHeight,
                                   int channels, const RowSource &rows,
                                   int64_t outWidth, int64_t outHeight) {
  assert(outWidth >= 1 && outHeight >= 1 && channels >= 1);
  const size_t inRow = size_t(inWidth * channels);
  const size_t outRow = size_t(outWidth * channels);
  std::vector<uint8_t> row(inRow);

  // Horizontal pass (or a copy) of every input row into `mid`.
  std::vector<uint8_t> mid(size_t(inHeight) * outRow);
  LanczosAxis h;
  bool horizontal = outWidth != inWidth;
  if (horizontal)
    h = lanczosAxis(inWidth, outWidth);
  for (int64_t y = 0; y < inHeight; ++y) {
    rows(y, row.data());
    uint8_t *dst = mid.data() + size_t(y) * outRow;
    if (!horizontal) {
      std::memcpy(dst, row.data(), inRow);
      continue;
    }
    for (int64_t x = 0; x < outWidth; ++x) {
      const int32_t *k = h.weights.data() + x * h.stride;
      const uint8_t *src = row.data() + h.first[size_t(x)] * channels;
      int64_t n = h.count[size_t(x)];
      for (int c = 0; c < channels; ++c) {
        int32_t acc = kHalf;
        for (int64_t j = 0; j < n; ++j)
          acc += int32_t(src[j * channels + c]) * k[j];
        dst[x * channels + c] = clip8(acc);
      }
    }
  }
  if (outHeight == inHeight)
    return mid;

  // Vertical pass over the uint8 intermediate.
  LanczosAxis v = lanczosAxis(inHeight, outHeight);
  std::vector<uint8_t> out(size_t(outHeight) * outRow);
  std::vector<int32_t> acc(outRow);
  for (int64_t y = 0; y < outHeight; ++y) {
    std::fill(acc.begin(), acc.end(), kHalf);
    const int32_t *k = v.weights.data() + y * v.stride;
    int64_t first = v.first[size_t(y)];
    for (int64_t j = 0; j < v.count[size_t(y)]; ++j) {
      const uint8_t *src = mid.data() + size_t(first + j) * outRow;
      int32_t w = k[j];
      for (size_t i = 0; i < outRow; ++i)
        acc[i] += int32_t(src[i]) * w;
    }
    uint8_t *dst = out.data() + size_t(y) * outRow;
    for (size_t i = 0; i < outRow; ++i)
      dst[i] = clip8(acc[i]);
  }
  return out;
}

std::vector<uint8_t> resizeLanczos(const uint8_t *pixels, int64_t inWidth,
                                   int64_t inHeight, int channels,
                                   int64_t outWidth, int64_t outHeight) {
  const size_t inRow = size_t(inWidth * channels);
  return resizeLanczos(
      inWidth, inHeight, channels,
      [&](int64_t y, uint8_t *row) {
        if (inRow)
          std::memcpy(row, pixels + size_t(y) * inRow, inRow);
      },
      outWidth, outHeight);
}

} // namespace trellis
