#include "engine/sample/basic_sampler.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ernie {

int32_t BasicSampler::Sample(std::span<const float> logits) {
  const auto argmax = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  if (temperature_ <= 0.0f) return argmax;
  // Inverse-CDF sampling from softmax(logits / T) with one uniform draw.
  const float max_logit = logits[static_cast<size_t>(argmax)];
  std::vector<double> weights(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    weights[i] = std::exp(static_cast<double>(logits[i] - max_logit) / temperature_);
    total += weights[i];
  }
  const double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
  double acc = 0.0;
  for (size_t i = 0; i < weights.size(); ++i) {
    acc += weights[i];
    if (u < acc) return static_cast<int32_t>(i);
  }
  return argmax;
}

}  // namespace ernie
