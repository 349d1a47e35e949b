// The logits processors that change a few entries of one row in place, in
// the order vLLM applies them: logit_bias, the min_tokens ban, then the
// repetition, frequency and presence penalties. Each costs O(entries it
// touches), never O(vocabulary). Token ids outside the row are skipped (ids
// from validated params never are; this only keeps a bad prompt id harmless).
#pragma once

#include <cstdint>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "engine/sample/sampling_params.h"
#include "engine/sample/token_counts.h"

namespace ernie {

// logits[id] += bias for every entry.
void ApplyLogitBias(const absl::flat_hash_map<int32_t, float>& logit_bias, std::span<float> logits);

// logits[id] = -inf for every id, so it can never be sampled.
void BanTokens(std::span<const int32_t> token_ids, std::span<float> logits);

// For each distinct token of prompt ∪ output: a positive logit is divided by
// `penalty`, a non-positive one multiplied (HF / vLLM). `prompt` may be null.
void ApplyRepetitionPenalty(float penalty, const PromptTokenSet* prompt, const OutputTokenCounts& output,
                            std::span<float> logits);

// For each output token with count c > 0: logits[id] -= frequency * c + presence.
void ApplyFrequencyAndPresencePenalties(float frequency_penalty, float presence_penalty,
                                        const OutputTokenCounts& output, std::span<float> logits);

// All of the above for one row, each only when its parameter is not "off".
// `eos_token_ids` are the model's end-of-sequence ids, banned with
// params.stop_token_ids while output.num_tokens() < params.min_tokens.
void ApplyLogitsProcessors(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
                           const PromptTokenSet* prompt, const OutputTokenCounts& output,
                           std::span<float> logits);

}  // namespace ernie
