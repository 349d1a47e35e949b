// The maximum of a row of logits, vectorizable: GCC will not vectorize a
// plain `m = v > m ? v : m` reduction over floats, but eight independent
// lanes it turns into vmaxps.
#pragma once

#include <algorithm>
#include <array>
#include <limits>
#include <span>

namespace ernie {

// The largest value; -inf for an empty row or one of only -inf and NaN
// (NaN never wins a comparison).
inline float RowMax(std::span<const float> values) {
  constexpr size_t kLanes = 8;
  std::array<float, kLanes> lanes;
  lanes.fill(-std::numeric_limits<float>::infinity());
  const float* data = values.data();
  size_t i = 0;
  for (; i + kLanes <= values.size(); i += kLanes) {
    for (size_t lane = 0; lane < kLanes; ++lane) lanes[lane] = lanes[lane] < data[i + lane] ? data[i + lane] : lanes[lane];
  }
  for (; i < values.size(); ++i) lanes[0] = lanes[0] < data[i] ? data[i] : lanes[0];
  float best = lanes[0];
  for (size_t lane = 1; lane < kLanes; ++lane) best = std::max(best, lanes[lane]);
  return best;
}

}  // namespace ernie
