// The sampling the offline CLI needs: greedy, or temperature sampling from a
// seeded generator. (The full sampler of the serving path, with top-k/top-p,
// penalties and per-request seeds in a batch, is engine/sample's Sampler.)
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace ernie {

class BasicSampler {
 public:
  // temperature 0 is greedy (argmax, ties to the smaller id).
  BasicSampler(float temperature, uint64_t seed) : temperature_(temperature), rng_(seed) {}

  int32_t Sample(std::span<const float> logits);

 private:
  float temperature_;
  std::mt19937_64 rng_;  // same seed, same tokens
};

}  // namespace ernie
