// Conversions between float32 and the 16-bit float formats of checkpoints.
// bf16 is the top half of a float32; f16 is IEEE binary16.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace ernie {

inline float Bf16ToFloat(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// Round to nearest even, as torch does; NaN stays a (quiet) NaN.
inline uint16_t FloatToBf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float F16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

// Round to nearest even; overflow becomes infinity.
inline uint16_t FloatToF16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7e00u;             // NaN
  if (u >= 0x477ff000u) return sign | 0x7c00u;            // overflow -> inf
  if (u < 0x38800000u) {                                  // subnormal or zero
    if (u < 0x33000000u) return sign;
    const uint32_t exp = u >> 23;
    uint32_t mant = (u & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;
    // Round to nearest even on the bits shifted out.
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    uint32_t result = mant >> shift;
    if (rem > halfway || (rem == halfway && (result & 1u))) ++result;
    return sign | static_cast<uint16_t>(result);
  }
  uint32_t result = ((u >> 13) - (112u << 10));
  const uint32_t rem = u & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (result & 1u))) ++result;
  return sign | static_cast<uint16_t>(result);
}

}  // namespace ernie
