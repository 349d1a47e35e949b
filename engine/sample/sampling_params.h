// Per-request sampling parameters of the serving path, engine-level and
// transport-free: the gRPC layer maps its proto onto this struct, the gateway
// fills it from the OpenAI request. Field names and ranges follow vLLM's
// SamplingParams (and through it the OpenAI API), which users expect.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace ernie {

// Limits that are ours rather than vLLM's (vLLM leaves n unbounded).
inline constexpr int32_t kMaxSamplesPerRequest = 128;  // n
inline constexpr int32_t kMaxTopLogprobs = 20;         // OpenAI's bound
inline constexpr float kMaxAbsLogitBias = 100.0f;      // OpenAI's bound
// Temperatures below this are greedy (vLLM's _SAMPLING_EPS): dividing by
// them would only turn the distribution into an argmax with rounding noise.
inline constexpr float kGreedyTemperatureEpsilon = 1e-5f;

// Defaults are "off" for every processor, so `SamplingParams{.temperature =
// 0.8f, .top_p = 0.8f}` means exactly what it says.
struct SamplingParams {
  // Scales logits by 1/temperature; 0 (or below kGreedyTemperatureEpsilon)
  // is greedy: argmax of the processed logits, ties to the smaller id.
  float temperature = 1.0f;
  // Keeps the smallest set of most probable tokens whose probability sums to
  // at least top_p (always at least one token). 1 = off.
  float top_p = 1.0f;
  // Keeps the top_k most probable tokens (ties to the smaller id). 0 or -1 = off.
  int32_t top_k = -1;
  // Drops tokens whose probability is below min_p * (the top probability).
  float min_p = 0.0f;
  // HF/vLLM style: for every token that occurs in the prompt or the output so
  // far, a positive logit is divided by it, a negative one multiplied. 1 = off.
  float repetition_penalty = 1.0f;
  // OpenAI style, over OUTPUT tokens only:
  //   logit -= presence_penalty * (count > 0) + frequency_penalty * count.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // token id -> bias added to its logit, before anything else.
  absl::flat_hash_map<int32_t, float> logit_bias;
  // Unset: the engine draws one at admission (see DrawRequestSeed). Either
  // way the same seed gives the same tokens whatever else is in the batch.
  std::optional<uint64_t> seed;
  // Generation stops after one of these (it is included in the output).
  std::vector<int32_t> stop_token_ids;
  // Do not stop at the model's end-of-sequence ids.
  bool ignore_eos = false;
  // Until this many output tokens exist, the eos ids and stop_token_ids are
  // banned (logit -inf), so generation cannot stop early.
  int64_t min_tokens = 0;
  // Unset: up to the model's context length.
  std::optional<int64_t> max_tokens;
  // Return the log-probability of every sampled token, and the top_logprobs
  // most likely alternatives (0..kMaxTopLogprobs) at each position.
  bool logprobs = false;
  int32_t top_logprobs = 0;
  // Independent samples per prompt (1..kMaxSamplesPerRequest).
  int32_t n = 1;
};

// True when `params` samples greedily.
inline bool IsGreedy(const SamplingParams& params) {
  return params.temperature < kGreedyTemperatureEpsilon;
}

// Checks every field's range against the model (vocab_size rows of logits,
// max_model_len tokens of context) and the prompt. The InvalidArgument message
// names the field and its allowed range, e.g.
// "top_p must be in (0, 1], got 1.5".
absl::Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size,
                                    int64_t max_model_len, int64_t prompt_len);

// The number of tokens the request may generate: max_tokens when set, else
// what is left of the context after the prompt. Call after validation.
int64_t EffectiveMaxTokens(const SamplingParams& params, int64_t max_model_len,
                           int64_t prompt_len);

}  // namespace ernie
