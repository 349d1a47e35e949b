#include "engine/sample/logit_edit.h"

namespace ernie {

bool HasPenalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
}

bool HasLogitEdits(const SamplingParams& p) { return !p.logit_bias.empty() || HasPenalties(p); }

LogitEditParams LogitEditParamsOf(const SamplingParams& p) {
  return {.repetition_penalty = p.repetition_penalty,
          .frequency_penalty = p.frequency_penalty,
          .presence_penalty = p.presence_penalty};
}

void AppendLogitEdits(const SamplingParams& p, const PromptTokenSet* prompt, const OutputTokenCounts& output,
                      int32_t vocab, std::vector<LogitEdit>* edits) {
  // Built every step for every such row (a few hundred tokens each at 256
  // rows), so without a map of its own: the prompt's ids are sorted and
  // unique, the output's counts and the biases are hash maps already.
  auto in_row = [vocab](int32_t id) { return id >= 0 && id < vocab; };
  const bool repetition = p.repetition_penalty != 1.0f && prompt != nullptr;
  const bool penalized = HasPenalties(p);
  auto with_bias = [&p](LogitEdit e) {
    if (!p.logit_bias.empty())
      if (auto it = p.logit_bias.find(e.token_id); it != p.logit_bias.end()) {
        e.bias = it->second;
        e.has_bias = 1;
      }
    return e;
  };
  if (repetition)
    for (int32_t id : prompt->distinct_ids())
      if (in_row(id)) edits->push_back(with_bias({.token_id = id, .output_count = output.CountOf(id), .in_prompt = 1}));
  if (penalized)
    for (const auto& [id, count] : output.counts())
      if (in_row(id) && !(repetition && prompt->Contains(id)))
        edits->push_back(with_bias({.token_id = id, .output_count = count}));
  for (const auto& [id, bias] : p.logit_bias) {
    if (!in_row(id)) continue;
    const bool listed = (repetition && prompt->Contains(id)) || (penalized && output.CountOf(id) > 0);
    if (!listed) edits->push_back({.token_id = id, .bias = bias, .has_bias = 1});
  }
}

void ApplyLogitEdits(std::span<const LogitEdit> edits, const LogitEditParams& p, std::span<float> logits) {
  for (const LogitEdit& e : edits) {
    float& logit = logits[static_cast<size_t>(e.token_id)];
    logit = EditedLogit(logit, e, p);
  }
}

SampleLogitEdits::SampleLogitEdits(const SamplingParams& params, const PromptTokenSet* prompt, int32_t vocab)
    : params_(&params),
      vocab_(vocab),
      penalized_(HasPenalties(params)) {
  AppendLogitEdits(params, prompt, OutputTokenCounts{}, vocab, &edits_);
  index_.reserve(edits_.size());
  for (size_t i = 0; i < edits_.size(); ++i) index_.emplace(edits_[i].token_id, static_cast<int32_t>(i));
}

void SampleLogitEdits::AddOutputToken(int32_t token_id) {
  ++num_output_tokens_;
  if (!penalized_ || token_id < 0 || token_id >= vocab_) return;
  auto [it, added] = index_.try_emplace(token_id, static_cast<int32_t>(edits_.size()));
  if (!added) {
    ++edits_[static_cast<size_t>(it->second)].output_count;
    return;
  }
  // Not in the prompt's list, and without a bias (every biased id is listed).
  edits_.push_back({.token_id = token_id, .output_count = 1});
}

}  // namespace ernie
