// Greedy rows without logprobs (the benchmarks' rows, and every
// temperature-0 request's): the argmax of each row, ties to the smaller id,
// NaN read as -inf, as the sampling kernel and the host Sampler choose it.
// The sampling kernel gives such a row one cluster of at most 8 CTAs, which
// walk the row's 103,424 logits in ~25 dependent loads a thread (9.7 us at
// batch 1, v18; 24 us for 64 rows, v24). Here a row is spread over every SM
// that is free: each CTA takes 2,048 logits, folds them into one 64-bit key
// (the value's order in the high half, the complement of the id in the low
// half) and atomicMax-es it into the row's key.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/sample_rows.h"

namespace ernie::cuda {

struct GreedyRowsParams {
  const float* logits = nullptr;         // [logit rows, vocab]
  const SampleRowParams* rows = nullptr;  // [num_rows]; only rows with fast_greedy set are read
  int32_t num_rows = 0;
  int32_t vocab = 0;
  unsigned long long* keys = nullptr;    // [num_rows], zeroed by the launch first
};

// Zeroes the keys and launches; both on `stream`.
cudaError_t LaunchGreedyRows(const GreedyRowsParams& p, cudaStream_t stream);

// The token a row's key names, or -1 when the row's maximum is not finite
// (only -inf and NaN, or a +inf) or no CTA wrote it. `key` as the kernel left it.
int32_t GreedyTokenOfKey(unsigned long long key);

}  // namespace ernie::cuda
