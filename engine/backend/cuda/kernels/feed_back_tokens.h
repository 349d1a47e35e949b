// Overlapped steps (StepBatch::fed_back_tokens): a decode's input token is
// the one the previous step sampled, which the host has not read yet. This
// kernel writes it into the step's device token ids, after their upload and
// before the forward pass, from the device sampler's results as the
// previous step left them (the greedy kernel writes its rows' tokens there
// too, as the sampling kernel does). A row without a valid token (its step
// failed) feeds token 0: that step's wait reports the error, and this row's
// output is dropped with its request.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/sample_rows.h"

namespace ernie::cuda {

struct FeedBackTokensParams {
  int32_t* token_ids = nullptr;               // [tokens] the step's uploaded ids
  const int32_t* fed = nullptr;               // [num_fed x 2] (token index, previous sample row) pairs
  int32_t num_fed = 0;
  const SampleRowResult* results = nullptr;   // the previous step's results (token)
  int32_t vocab = 0;
};

cudaError_t LaunchFeedBackTokens(const FeedBackTokensParams& p, cudaStream_t stream);

}  // namespace ernie::cuda
