// exp() for the sampler's hot loops: the argument is always logit - max <= 0.
#pragma once

#include <bit>
#include <cstdint>

namespace ernie {

// exp(x) for x <= 0, to about 2e-7 relative error; exactly 0 at or below -87
// (where the float result would be denormal), for -inf and for NaN, so that
// banned tokens keep weight 0. Inline and branch-free so that loops over a row
// vectorize.
//
// The range test and both selects are integer operations on the bits on
// purpose: GCC (with the default -ftrapping-math) will not if-convert a float
// comparison, and a loop with control flow does not vectorize (std::exp is a
// call and never would).
inline float FastExpNonPositive(float x) {
  const auto bits = std::bit_cast<int32_t>(x);
  constexpr int32_t kLowestBits = std::bit_cast<int32_t>(-87.0f);
  constexpr int32_t kInfinityBits = 0x7F800000;
  // Negative floats order in reverse of their bits read as int32 (sign
  // magnitude): x in (-87, -0] has bits below kLowestBits (and -inf, -NaN
  // above). Non-negative finite floats have bits in [0, kInfinityBits).
  const bool in_range = bits < kLowestBits || (bits >= 0 && bits < kInfinityBits);
  const uint32_t keep = 0u - static_cast<uint32_t>(in_range);  // all ones or zero
  x = std::bit_cast<float>((static_cast<uint32_t>(bits) & keep) | (static_cast<uint32_t>(kLowestBits) & ~keep));

  // x = n ln2 + r with |r| <= ln2 / 2; ln2 split in two for an exact n ln2.
  // Adding 1.5 * 2^23 rounds to an integer, which then sits in the low bits.
  constexpr float kRoundingShift = 12582912.0f;
  const float shifted = x * 1.44269504f + kRoundingShift;
  const float n = shifted - kRoundingShift;
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  // Taylor series to r^6: the remainder |r|^7 / 7! is below 1.3e-7.
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t exponent = std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(kRoundingShift) + 127u;
  const float two_to_n = std::bit_cast<float>(exponent << 23);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(p * two_to_n) & keep);
}

}  // namespace ernie
