// In-graph kernel timelines through CUPTI's activity API (the device has no
// nsys, and ncu serializes kernels, so neither shows what a decode step's
// graph does with programmatic dependent launches overlapping its kernels).
//
// KernelTimeline::Start() enables concurrent-kernel activity records for the
// process; it must run before the graphs to be traced are captured (before
// the backend is created), since CUPTI instruments a graph's kernels when it
// is instantiated. Collect() returns the kernels that ended since the last
// Collect() (or Start()), sorted by start time, GPU timestamps in ns.
//
// Summarize() turns one step's kernels into the figures a breakdown needs:
// the step's span (first start to last end) and, per kernel, how much it
// extends the step's end beyond the kernel before ("increment": its share of
// the critical path when kernels overlap) and any idle gap before it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ernie::bench {

struct KernelRecord {
  std::string name;  // demangled, without namespaces, parameters or return type
  uint64_t start_ns = 0, end_ns = 0;
  int32_t grid = 0;           // gridX * gridY * gridZ
  int32_t block = 0;          // threads a CTA
  int32_t dynamic_smem = 0;   // bytes
  uint32_t graph_id = 0;      // 0: launched outside a graph
};

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

// A readable key for grouping one step's launches: the kernel's name with
// its grid, CTA size and dynamic shared memory (one kernel serves several
// linears of a layer; their shapes tell them apart).
std::string KernelKey(const KernelRecord& k);

// {"span_us", "kernels", "gaps_us", "sum_duration_us", "by_kernel": [{"kernel", "count",
//  "increment_us", "duration_us"}...] largest increment first, "sequence": the first
// `sequence_len` kernels with start / duration / increment / gap}.
nlohmann::json Summarize(const std::vector<KernelRecord>& step, int sequence_len);

}  // namespace ernie::bench
