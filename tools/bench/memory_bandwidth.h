// Measures how fast this machine's threads can stream memory in, the ceiling
// of a memory-bound decode step.
#pragma once

#include <cstdint>

#include "engine/util/thread_pool.h"

namespace ernie::bench {

struct BandwidthResult {
  double read_gb_per_s = 0;  // best of the repetitions, 1 GB = 1e9 bytes
  int64_t buffer_bytes = 0;
  int threads = 0;
};

// Reads a buffer of `bytes` (far above the caches) `repeats` times with every
// thread of `pool`, each thread a contiguous slice.
BandwidthResult MeasureReadBandwidth(ThreadPool& pool, int64_t bytes, int repeats);

}  // namespace ernie::bench
