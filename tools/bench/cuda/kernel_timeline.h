// In-graph kernel timelines through CUPTI's activity API (the device has no
// nsys, and ncu serializes kernels, so neither shows what a decode step's
// graph does with programmatic dependent launches overlapping its kernels).
//
// KernelTimeline::Start() enables concurrent-kernel activity records for the
// process; it must run before the graphs to be traced are captured (before
// the backend is created), since CUPTI instruments a graph's kernels when it
// is instantiated. Collect() returns the kernels that ended since the last
// Collect() (or Start()), sorted by start time, GPU timestamps in ns;
// kernel_timeline_summary.h turns one step's records into a breakdown.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/bench/kernel_timeline_summary.h"

namespace ernie::bench {

class KernelTimeline {
 public:
  // One per process; a second Start() while one is live fails.
  static absl::StatusOr<std::unique_ptr<KernelTimeline>> Start();
  ~KernelTimeline();
  KernelTimeline(const KernelTimeline&) = delete;
  KernelTimeline& operator=(const KernelTimeline&) = delete;

  // Synchronizes the device, flushes CUPTI's buffers and returns the kernels
  // recorded since the last call. DataLoss when CUPTI dropped records.
  absl::StatusOr<std::vector<KernelRecord>> Collect();

 private:
  KernelTimeline() = default;
};

}  // namespace ernie::bench
