// Histogram buckets shared by the worker and the gateway, so the same
// latency means the same buckets wherever it is measured. vLLM's bounds,
// extended downwards: a decode step here can take well under a millisecond.
#pragma once

#include <cstdint>
#include <vector>

namespace ernie::metrics {

// Time to first token.
inline std::vector<double> FirstTokenBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
          160, 640, 2560};
}
// The parts of a time to first token (tokenization, a worker's answer):
// a few milliseconds each when all is well, so millisecond steps up to 20.
inline std::vector<double> LatencyPartBuckets() {
  return {0.00025, 0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.0175, 0.02, 0.025,
          0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}
// Inter-token latency and step duration.
inline std::vector<double> TokenGapBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
          0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80};
}
// Whole-request phases: end to end, queue, prefill, decode, inference.
inline std::vector<double> RequestTimeBuckets() {
  return {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120,
          240, 480, 960, 1920, 7680};
}
// Token counts (prompt and generation lengths, tokens per step): 1, 2, 5,
// 10, 20, 50, ... up to the first bound >= `max_value`.
inline std::vector<double> OneTwoFiveBuckets(int64_t max_value) {
  std::vector<double> bounds;
  for (int64_t decade = 1;; decade *= 10) {
    for (int64_t m : {1, 2, 5}) {
      bounds.push_back(static_cast<double>(m * decade));
      if (m * decade >= max_value) return bounds;
    }
  }
}
// Rows per step: 1, 2, 4, ... up to the first power of two >= `max_value`.
inline std::vector<double> PowerOfTwoBuckets(int64_t max_value) {
  std::vector<double> bounds;
  for (int64_t b = 1;; b *= 2) {
    bounds.push_back(static_cast<double>(b));
    if (b >= max_value) return bounds;
  }
}

}  // namespace ernie::metrics
