// Log-probabilities from logits, float32, and the top-k of them.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace ernie {

// out[i] = logits[i] - logsumexp(logits); out may alias logits.
void LogSoftmax(std::span<const float> logits, std::span<float> out);

// The k largest entries as (id, value), largest first; ties broken by the
// smaller id (so results do not depend on the sort's stability).
std::vector<std::pair<int32_t, float>> TopK(std::span<const float> values, int k);

}  // namespace ernie
