// What an in-graph kernel timeline says about one step (ernie-bench-cuda
// --timeline-batches; the records come from CUPTI, tools/bench/cuda/
// kernel_timeline.h). CPU-only, so it is tested without a device.
//
// With programmatic dependent launches a kernel starts before the one before
// it ends and waits, so durations overlap and do not add up to the step.
// Each kernel's *increment* is how far it moves the step's end past every
// kernel before it (end - max(start, latest end so far), at least 0): the
// increments and the idle gaps between kernels add up to the step's span,
// which makes them the step's critical path, kernel by kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace ernie::bench {

struct KernelRecord {
  std::string name;  // ShortKernelName of the symbol
  uint64_t start_ns = 0, end_ns = 0;
  int32_t grid = 0;          // gridX * gridY * gridZ
  int32_t block = 0;         // threads a CTA
  int32_t dynamic_smem = 0;  // bytes
  uint32_t graph_id = 0;     // 0: launched outside a graph
};

// A kernel symbol, mangled or not, without its namespaces, return type and
// parameters: "_ZN5ernie4cuda..18DecodeLinearKernelILi1EEEvNS0_18DecodeLinearParamsE"
// -> "DecodeLinearKernel<1>"; a name that does not demangle is kept as it is.
std::string ShortKernelName(const char* symbol);

// A readable key for grouping one step's launches: the kernel's name with
// its grid, CTA size and dynamic shared memory (one kernel serves several
// linears of a layer; their shapes tell them apart).
std::string KernelKey(const KernelRecord& k);

// One step's kernels, sorted by start: {"span_us", "kernels", "gaps_us",
// "sum_duration_us", "by_kernel": [{"kernel", "count", "increment_us",
// "duration_us"}...] largest increment first, "sequence": the first
// `sequence_len` kernels with start / duration / increment / gap}.
// {"kernels": 0} for none.
nlohmann::json Summarize(const std::vector<KernelRecord>& step, int sequence_len);

}  // namespace ernie::bench
