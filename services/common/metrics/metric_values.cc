#include "services/common/metrics/metric_values.h"

#include <algorithm>

namespace ernie::metrics {

Histogram::Histogram(std::span<const double> upper_bounds)
    : upper_bounds_(upper_bounds), buckets_(new std::atomic<uint64_t>[upper_bounds.size() + 1]) {
  for (size_t i = 0; i <= upper_bounds.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value, uint64_t count) {
  if (count == 0) return;
  // Bucket i holds values in (bound[i-1], bound[i]]: the first bound >= value.
  const auto it = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value);
  buckets_[static_cast<size_t>(it - upper_bounds_.begin())].fetch_add(count, std::memory_order_relaxed);
  sum_.fetch_add(value * static_cast<double>(count), std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot snapshot;
  snapshot.cumulative.resize(upper_bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    snapshot.cumulative[i] = running;
  }
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

}  // namespace ernie::metrics
