// The standard process metrics every Prometheus client exports, read from
// /proc/self at scrape time: process_cpu_seconds_total,
// process_resident_memory_bytes, process_virtual_memory_bytes,
// process_start_time_seconds, process_open_fds, process_max_fds. They keep
// their conventional names (no ernie_ prefix) so stock dashboards work.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/common/metrics/registry.h"

namespace ernie::metrics {

struct ProcessStats {
  double cpu_seconds = 0;          // user + system
  int64_t resident_bytes = 0;
  int64_t virtual_bytes = 0;
  double start_time_seconds = 0;   // since the Unix epoch
  int64_t open_fds = 0;
  int64_t max_fds = 0;
};

// Reads /proc/self/stat, /proc/stat (boot time), /proc/self/fd and the fd limit.
absl::StatusOr<ProcessStats> ReadProcessStats();

// Registers the six families as scrape-time callbacks.
absl::Status RegisterProcessMetrics(Registry& registry);

}  // namespace ernie::metrics
