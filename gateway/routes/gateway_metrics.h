// The gateway's own counters, written as a Prometheus text exposition:
// requests by route and status, and requests / streams in flight.
// Thread-safe.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace ernie::gateway {

class GatewayMetrics {
 public:
  void CountRequest(const std::string& route, int status);
  void StreamStarted() { streams_in_flight_.fetch_add(1); }
  void StreamEnded() { streams_in_flight_.fetch_sub(1); }
  void RequestStarted() { requests_in_flight_.fetch_add(1); }
  void RequestEnded() { requests_in_flight_.fetch_sub(1); }

  int64_t streams_in_flight() const { return streams_in_flight_.load(); }
  int64_t requests_in_flight() const { return requests_in_flight_.load(); }
  int64_t requests(const std::string& route, int status) const;

  // "# HELP"/"# TYPE" lines and one sample per series.
  std::string Exposition() const;

 private:
  mutable std::mutex mutex_;                                  // guards requests_
  std::map<std::pair<std::string, int>, int64_t> requests_;  // (route, status) -> count
  std::atomic<int64_t> streams_in_flight_{0};
  std::atomic<int64_t> requests_in_flight_{0};
};

}  // namespace ernie::gateway
