#include "engine/sample/logits_processors.h"

#include <limits>

#include "engine/sample/logit_edit_math.h"

namespace ernie {
namespace {

bool InRow(int32_t token_id, std::span<float> logits) {
  return token_id >= 0 && static_cast<size_t>(token_id) < logits.size();
}

}  // namespace

void ApplyLogitBias(const absl::flat_hash_map<int32_t, float>& logit_bias, std::span<float> logits) {
  for (const auto& [token_id, bias] : logit_bias) {
    if (InRow(token_id, logits)) logits[static_cast<size_t>(token_id)] = LogitBiased(logits[static_cast<size_t>(token_id)], bias);
  }
}

void BanTokens(std::span<const int32_t> token_ids, std::span<float> logits) {
  for (int32_t token_id : token_ids) {
    if (InRow(token_id, logits)) logits[static_cast<size_t>(token_id)] = -std::numeric_limits<float>::infinity();
  }
}

void ApplyRepetitionPenalty(float penalty, const PromptTokenSet* prompt, const OutputTokenCounts& output,
                            std::span<float> logits) {
  if (prompt != nullptr) {
    for (int32_t token_id : prompt->distinct_ids()) {
      if (InRow(token_id, logits)) logits[static_cast<size_t>(token_id)] = RepetitionPenalized(logits[static_cast<size_t>(token_id)], penalty);
    }
  }
  for (const auto& [token_id, count] : output.counts()) {
    // A token in both sets is penalized once, as vLLM's mask over the union does.
    if (prompt != nullptr && prompt->Contains(token_id)) continue;
    if (InRow(token_id, logits)) logits[static_cast<size_t>(token_id)] = RepetitionPenalized(logits[static_cast<size_t>(token_id)], penalty);
  }
}

void ApplyFrequencyAndPresencePenalties(float frequency_penalty, float presence_penalty,
                                        const OutputTokenCounts& output, std::span<float> logits) {
  for (const auto& [token_id, count] : output.counts()) {
    if (!InRow(token_id, logits)) continue;
    float& logit = logits[static_cast<size_t>(token_id)];
    logit = FrequencyPresencePenalized(logit, count, frequency_penalty, presence_penalty);
  }
}

void ApplyLogitsProcessors(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
                           const PromptTokenSet* prompt, const OutputTokenCounts& output,
                           std::span<float> logits) {
  if (!params.logit_bias.empty()) ApplyLogitBias(params.logit_bias, logits);
  if (output.num_tokens() < params.min_tokens) {
    BanTokens(eos_token_ids, logits);
    BanTokens(params.stop_token_ids, logits);
  }
  if (params.repetition_penalty != 1.0f) ApplyRepetitionPenalty(params.repetition_penalty, prompt, output, logits);
  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    ApplyFrequencyAndPresencePenalties(params.frequency_penalty, params.presence_penalty, output, logits);
  }
}

}  // namespace ernie
