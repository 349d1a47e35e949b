// One prompt, one continuation, straight on a backend: what `ernie-generate`
// runs and what the reference tests drive. The prompt is prefilled in chunks
// (chunk size a parameter) through the paged KV cache, then decoded one token
// a step. Blocks for the single sequence are taken from the whole pool in a
// shuffled order, so non-contiguous block tables are exercised too.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"

namespace ernie {

struct OfflineGenerateOptions {
  int max_tokens = 16;
  float temperature = 0.0f;        // 0: greedy
  uint64_t seed = 0;
  int top_logprobs = 0;            // 0..20 alternatives per step
  int64_t prefill_chunk = 0;       // tokens per prefill step; 0: the backend's max
  std::vector<int64_t> stop_token_ids;  // end generation (the token is kept); e.g. eos
  uint64_t block_order_seed = 1;   // 0: blocks in order 0, 1, 2, ...; else a seeded shuffle
};

struct OfflineGenerateTiming {
  double prefill_ms = 0;
  double decode_ms = 0;            // every step after the first generated token
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t prefill_steps = 0;
};

struct OfflineGenerateResult {
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;     // log-softmax (float32) of each chosen token
  std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;  // per step, best first
  std::string finish_reason;       // "stop" (a stop token) or "length"
  OfflineGenerateTiming timing;
};

// Called with each step's raw logits [vocab] before sampling (for --dump-logits).
using LogitsObserver = std::function<void(std::span<const float>)>;

// InvalidArgument for an empty prompt, ids outside the vocabulary, options out
// of range; ResourceExhausted when prompt + max_tokens exceed the KV pool.
absl::StatusOr<OfflineGenerateResult> GenerateOffline(Backend& backend, std::span<const int32_t> prompt,
                                                      const OfflineGenerateOptions& options,
                                                      const LogitsObserver& observer = nullptr);

}  // namespace ernie
