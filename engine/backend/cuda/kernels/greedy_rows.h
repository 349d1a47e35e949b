// Greedy rows without logprobs (the benchmarks' rows, and every
// temperature-0 request's): the argmax of each row, ties to the smaller id,
// NaN read as -inf, as the sampling kernel and the host Sampler choose it.
// The sampling kernel gives such a row one cluster of at most 8 CTAs, which
// walk the row's 103,424 logits in ~25 dependent loads a thread (9.7 us at
// batch 1, v18; 24 us for 64 rows, v24). Here a row is spread over every SM
// that is free: each CTA takes 2,048 logits, folds them into one 64-bit key
// (the value's order in the high half, the complement of the id in the low
// half) and atomicMax-es it into the row's running key.
//
// No other operation of the step sits between the lm_head and the host's
// read of the keys: the running keys and arrival counts are zero between
// launches (the sampler zeroes them once; the last CTA of a row, which the
// counts name, takes its key and zeroes both again), so no memset precedes
// the launch; and that CTA writes the key straight into the page-locked
// staging the host reads, so no copy follows it. Each was a graph-less
// operation of its own on the stream after every decode step's graph. When
// every row is fast and row i reads logits row i (a decode step's greedy
// rows), the launch takes no parameters from the device either (rows
// nullptr), so none are uploaded before it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/sample_rows.h"

namespace ernie::cuda {

struct GreedyRowsParams {
  const float* logits = nullptr;            // [logit rows, vocab]
  // [num_rows]; only rows with fast_greedy set are read. nullptr: every row
  // is fast and row i reads logits row i.
  const SampleRowParams* rows = nullptr;
  int32_t num_rows = 0;
  int32_t vocab = 0;
  // [num_rows] each fast row's key: device memory, or page-locked host
  // memory as the device addresses it (the host then reads it with no copy).
  unsigned long long* keys = nullptr;
  SampleRowResult* results = nullptr;       // [num_rows] or nullptr: each fast row's token (GreedyTokenOfKey's)
  unsigned long long* running = nullptr;    // [num_rows] zero between launches
  uint32_t* arrivals = nullptr;             // [num_rows] zero between launches
};

// Launches on `stream`. `running` and `arrivals` must be zero on entry (zero
// them once when they are allocated); the launch leaves them zero.
cudaError_t LaunchGreedyRows(const GreedyRowsParams& p, cudaStream_t stream);

// The token a row's key names, or -1 when the row's maximum is not finite
// (only -inf and NaN, or a +inf) or no CTA wrote it. `key` as the kernel left it.
int32_t GreedyTokenOfKey(unsigned long long key);

}  // namespace ernie::cuda
