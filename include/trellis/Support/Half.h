//===- Half.h - IEEE binary16 conversions ---------------------------------===//
//
// fp32 <-> fp16 with round-to-nearest-even, as the GPU's cvt.rn.f16.f32 does.
// The reference backend rounds through these wherever TRELLIS stores fp16.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_SUPPORT_HALF_H
#define TRELLIS_SUPPORT_HALF_H

#include <bit>
#include <cstdint>

namespace trellis {

/// Converts an IEEE binary16 bit pattern to float (exact).
inline float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: renormalize
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while ((mant & 0x400) == 0);
      mant &= 0x3ff;
      bits = sign | uint32_t(127 - 15 - e) << 23 | mant << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13; // inf / nan
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  return std::bit_cast<float>(bits);
}

/// Converts a float to the nearest binary16 (ties to even); overflow -> inf.
inline uint16_t floatToHalf(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000u) // inf or nan (keep nan quiet)
    return sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0);
  if (absx >= 0x477ff000u) // >= 65520 rounds to inf
    return sign | 0x7c00;
  if (absx < 0x38800000u) { // below the smallest normal half: subnormal or 0
    if (absx < 0x33000000u) // < 2^-25 rounds to zero
      return sign;
    uint32_t mant = (absx & 0x7fffff) | 0x800000;
    int shift = 126 - int(absx >> 23); // 14..24
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1)))
      ++half;
    return sign | uint16_t(half);
  }
  uint32_t half = ((absx >> 13) - ((127 - 15) << 10));
  uint32_t rem = absx & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
    ++half;
  return sign | uint16_t(half);
}

/// Rounds a float to the nearest fp16 value and returns it as float.
inline float roundToHalf(float f) { return halfToFloat(floatToHalf(f)); }

} // namespace trellis

#endif // TRELLIS_SUPPORT_HALF_H
