// The three value kinds of the metrics library. Each one is a handful of
// atomics: updating a value never takes a lock, so the engine thread, gRPC
// reactors and HTTP I/O threads all update them on their hot paths. Look a
// labelled value up once (Family::WithLabels) and keep the reference.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace ernie::metrics {

// Monotonic; Increment with a negative amount is ignored (a counter never goes down).
class Counter {
 public:
  void Increment(double amount = 1.0) {
    if (amount > 0) value_.fetch_add(amount, std::memory_order_relaxed);
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double amount) { value_.fetch_add(amount, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Counts observations per bucket (non-cumulative atomics; the exposition
// makes them cumulative). `upper_bounds` is sorted, finite and owned by the
// family, which outlives every histogram of it.
class Histogram {
 public:
  explicit Histogram(std::span<const double> upper_bounds);

  // Records `count` observations of `value` (count > 1: the same value seen
  // several times, e.g. one inter-token gap per token of a coalesced chunk).
  void Observe(double value, uint64_t count = 1);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // [bounds + 1]: <= each bound, then +Inf (== count)
    double sum = 0;
  };
  Snapshot Read() const;
  std::span<const double> upper_bounds() const { return upper_bounds_; }

 private:
  std::span<const double> upper_bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // [bounds + 1], the last is (last bound, +Inf)
  std::atomic<double> sum_{0.0};
};

// Bucket helpers. Exponential: start, start*factor, ... (count bounds).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

}  // namespace ernie::metrics
