// Sampling kernel: one cluster of CTAs per sample row (a slice of the row
// each) turns a row of float32 logits into a token (greedy, or a draw from
// softmax(logits / T) truncated by min_p, top_k and top_p) and its raw
// log-probabilities, with the host Sampler's
// semantics (engine/sample/sampler.h, truncated_distribution.h): the same
// weights (the same exp, rounded the same way), the same kept prefix in the
// order (probability desc, id asc) found by the same three-level radix
// select, and a draw that walks kept tokens in id order. Only float rounding
// of sums (atomics here, lanes there) can differ, which flips a choice only
// when the draw or a threshold lands within rounding of a boundary.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ernie::cuda {

inline constexpr int kMaxDeviceTopLogprobs = 20;  // kMaxTopLogprobs of sampling_params.h

// One sample row, made on the host (DeviceSampler).
struct SampleRowParams {
  double uniform = 0.0;             // the draw in [0, 1): SamplingUniform(seed, sample_index, position)
  int32_t logit_row = 0;            // row of SampleRowsParams::logits
  int32_t greedy = 0;               // 1: argmax, ties to the smaller id
  float inverse_temperature = 1.0f; // 1.0f / temperature, computed as the host does
  int32_t top_k = 0;                // <= 0 or >= vocab: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  int32_t logprobs = 0;             // 1: the sampled token's raw log-probability
  int32_t top_logprobs = 0;         // 0 .. kMaxDeviceTopLogprobs best raw log-probabilities
  int32_t fast_greedy = 0;          // 1: greedy_rows.h takes the row (greedy, no logprobs);
                                    // this kernel skips it
  int32_t stats_only = 0;           // 1: the raw pass of a row the logit edits will change
                                    // (DeviceSampler): token is the raw argmax, and only
                                    // log_normalizer and the top log-probabilities are written
};

struct SampleRowResult {
  int32_t token = -1;    // -1: the row has no finite logit (a broken step)
  float logprob = 0.0f;  // when logprobs
  float token_logit = 0.0f;     // the row's logit at `token` (NaN read as -inf)
  float log_normalizer = 0.0f;  // when logprobs or top_logprobs: max + log(sum exp(x - max))
  int32_t top_ids[kMaxDeviceTopLogprobs];
  float top_logprobs[kMaxDeviceTopLogprobs];  // best first, ties to the smaller id
};

struct SampleRowsParams {
  const float* logits = nullptr;           // [logit rows, vocab] float32, read only
  const SampleRowParams* rows = nullptr;   // [num_rows]
  SampleRowResult* results = nullptr;      // [num_rows]
  int32_t num_rows = 0;
  int32_t vocab = 0;
};

cudaError_t LaunchSampleRows(const SampleRowsParams& p, cudaStream_t stream);

}  // namespace ernie::cuda
