// Pseudo-random test inputs for the CUDA kernel tests: uniform in
// [-scale, scale), float32 or rounded to bf16 (the raw bits), drawn from the
// caller's generator so each test's inputs are fixed by its seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/util/half.h"

namespace ernie::testing {

inline std::vector<float> RandomFloats(size_t count, std::mt19937& gen, float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> out(count);
  for (auto& v : out) v = dist(gen);
  return out;
}

inline std::vector<uint16_t> RandomBf16(size_t count, std::mt19937& gen, float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<uint16_t> out(count);
  for (auto& v : out) v = FloatToBf16(dist(gen));
  return out;
}

}  // namespace ernie::testing
