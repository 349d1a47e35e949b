// exp() for the sampler's hot loops: the argument is always logit - max <= 0.
#pragma once

#include <bit>
#include <cstdint>

namespace ernie {

// exp(x) for x <= 0, to about 2e-7 relative error; 0 below -87 (where the
// float result would be denormal) and for NaN. Branch-free and inline so that
// loops over a row vectorize (std::exp is a call the compiler cannot).
inline float FastExpNonPositive(float x) {
  const bool in_range = x > -87.0f;  // false for NaN too
  x = in_range ? x : -87.0f;
  // x = n ln2 + r with |r| <= ln2 / 2; ln2 split in two for an exact n ln2.
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  // Taylor series to r^6: the remainder |r|^7 / 7! is below 1.3e-7.
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float two_to_n = std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  return in_range ? p * two_to_n : 0.0f;
}

}  // namespace ernie
