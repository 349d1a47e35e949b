#include "engine/sample/logprobs.h"

#include <algorithm>
#include <cmath>

namespace ernie {

void LogSoftmax(std::span<const float> logits, std::span<float> out) {
  float max_logit = -INFINITY;
  for (float v : logits) max_logit = std::max(max_logit, v);
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - max_logit));
  const float log_z = max_logit + static_cast<float>(std::log(sum));
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - log_z;
}

std::vector<std::pair<int32_t, float>> TopK(std::span<const float> values, int k) {
  k = std::clamp<int>(k, 0, static_cast<int>(values.size()));
  std::vector<int32_t> ids(values.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  auto better = [&](int32_t a, int32_t b) {
    const float va = values[static_cast<size_t>(a)], vb = values[static_cast<size_t>(b)];
    return va > vb || (va == vb && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), better);
  std::vector<std::pair<int32_t, float>> out;
  out.reserve(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) out.emplace_back(ids[static_cast<size_t>(i)], values[static_cast<size_t>(ids[static_cast<size_t>(i)])]);
  return out;
}

}  // namespace ernie
