//===- Fp8.cpp - FP8 (E4M3) emulation and the W8A8 quantized linear ------===//
//
// The rounding works on the fp32 bit pattern with integer arithmetic, so it
// does not depend on the floating-point environment: in the normal range it
// rounds the 23-bit mantissa to 3 bits (a carry moves into the exponent as
// it should); below 2^-6 it rounds the significand to a multiple of 2^-9.
//
//===----------------------------------------------------------------------===//
#include "trellis/Reference/Fp8.h"

#include "trellis/Reference/Parallel.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace trellis::ref {

namespace {

uint32_t floatBits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

constexpr uint32_t kF32Inf = 0x7F800000u;
constexpr uint32_t kF32Bits448 = 0x43E00000u; // 448.0f
constexpr uint8_t kE4M3Max = 0x7E, kE4M3NaN = 0x7F;

/// The 256 values of fromE4M3, built once.
const std::array<float, 256> &e4m3Table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b)
      t[size_t(b)] = fromE4M3(uint8_t(b));
    return t;
  }();
  return table;
}

} // namespace

uint8_t toE4M3(float x) {
  const uint32_t bits = floatBits(x);
  const uint8_t sign = uint8_t((bits >> 24) & 0x80u);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > kF32Inf)
    return kE4M3NaN;
  // Satfinite: everything from 448 up (inf included) is ±448. Values in
  // (448, 464] would round to 448 anyway; beyond, E4M3 has no finite value.
  if (abs >= kF32Bits448)
    return uint8_t(sign | kE4M3Max);
  const int exp = int(abs >> 23); // biased by 127
  if (exp >= 127 - 6) {
    // Normal: keep 3 mantissa bits, ties to even. The rounded value stays
    // below 448, so the result is at most 0x7E.
    const uint32_t rounded = (abs + 0x7FFFFu + ((abs >> 20) & 1u)) >> 20;
    // (exp << 3 | mantissa) rebiased from 127 to 7.
    return uint8_t(sign | (rounded - ((127u - 7u) << 3)));
  }
  if (exp == 0) // fp32 subnormals are far below 2^-10
    return sign;
  // Subnormal: |x| = sig · 2^(exp - 150), in units of 2^-9 that is
  // sig / 2^(141 - exp). With exp <= 120 the shift is at least 21.
  const uint32_t sig = (abs & 0x7FFFFFu) | 0x800000u;
  const int shift = 141 - exp;
  if (shift > 24) // sig / 2^shift < 1/2
    return sign;
  const uint32_t q = sig >> shift;
  const uint32_t rem = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  const uint32_t m = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
  // m == 8 is 0x08, the min normal: the encoding continues seamlessly.
  return uint8_t(sign | m);
}

float fromE4M3(uint8_t b) {
  if ((b & 0x7Fu) == kE4M3NaN)
    return std::numeric_limits<float>::quiet_NaN();
  const int exp = (b >> 3) & 0xF, mant = b & 0x7;
  const float mag = exp == 0 ? std::ldexp(float(mant), -9)
                             : std::ldexp(float(8 + mant), exp - 10);
  return (b & 0x80u) ? -mag : mag;
}

float e4m3Amax(const float *x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(x[i]))
      amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

E4M3Scale e4m3ScaleFor(float amax) {
  if (!(amax > 0.0f) || !std::isfinite(amax))
    return {1.0f, 1.0f};
  return {448.0f / amax, amax / 448.0f};
}

void quantizeE4M3(const float *x, int64_t n, float quantizeScale,
                  uint8_t *out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = toE4M3(x[i] * quantizeScale);
}

void linearE4M3(const float *x, const float *w, const float *bias, int64_t rows,
                int64_t in, int64_t out, float *y, float activationAmax) {
  const E4M3Scale sx = e4m3ScaleFor(
      activationAmax > 0.0f ? activationAmax : e4m3Amax(x, rows * in));
  const E4M3Scale sw = e4m3ScaleFor(e4m3Amax(w, out * in));
  std::vector<uint8_t> xq(size_t(rows * in)), wq(size_t(out * in));
  quantizeE4M3(x, rows * in, sx.quantize, xq.data());
  quantizeE4M3(w, out * in, sw.quantize, wq.data());
  // Dequantize the weight once (fp32 holds every E4M3 value exactly).
  const std::array<float, 256> &table = e4m3Table();
  std::vector<float> wd(wq.size());
  for (size_t i = 0; i < wq.size(); ++i)
    wd[i] = table[wq[i]];
  const float dequantize = sx.dequantize * sw.dequantize;
  parallelFor(rows,
              std::max<int64_t>(1, 16384 / std::max<int64_t>(1, out * in)),
              [&](int64_t begin, int64_t end) {
                std::vector<float> xr(size_t(std::max<int64_t>(in, 0)));
                for (int64_t r = begin; r < end; ++r) {
                  for (int64_t k = 0; k < in; ++k)
                    xr[size_t(k)] = table[xq[size_t(r * in + k)]];
                  for (int64_t o = 0; o < out; ++o) {
                    const float *wr = wd.data() + o * in;
                    float acc = 0.0f;
                    for (int64_t k = 0; k < in; ++k)
                      acc += xr[size_t(k)] * wr[k];
                    float v = acc * dequantize;
                    if (bias)
                      v = v + bias[o];
                    y[r * out + o] = v;
                  }
                }
              });
}

} // namespace trellis::ref
