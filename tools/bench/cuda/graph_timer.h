// Timing of a kernel or library call the way a decode step runs it: one
// CUDA graph holds one launch per copy of the weights (the copies together
// larger than the L2, so no launch finds its weights on chip), replayed
// after two warm-up runs; the median per launch is kept, launch gaps inside
// a graph included. Shared by ernie-bench-gemv and ernie-bench-gemm-algos.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

#include "absl/status/statusor.h"

namespace ernie::bench {

// Median microseconds per launch of launch(0 .. copies - 1) over `reps`
// replays. launch(0) runs once eagerly first (launchers fill their
// occupancy caches outside the capture).
absl::StatusOr<double> TimeLaunchesInGraph(cudaStream_t stream, int copies, int reps,
                                           const std::function<absl::Status(int)>& launch);

}  // namespace ernie::bench
