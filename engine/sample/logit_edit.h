// A row's logits processors (logit_bias, repetition, frequency and presence
// penalties) as a short list of per-token edits, so that a device sampler can
// apply them to the row where it lies instead of copying 400 KB of logits to
// the host for the host Sampler. Each edit touches one distinct token; the
// arithmetic is the host's own (logits_processors.cc calls the same inline
// primitives of logit_edit_math.h).
//
// The min_tokens ban is not an edit: the device sampler uploads the banned
// ids beside the edits, and its edit kernel bans them after the edits (the
// host bans before the penalties, which leave -inf as it is: the same row).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/sample/logit_edit_math.h"
#include "engine/sample/sampling_params.h"
#include "engine/sample/token_counts.h"

namespace ernie {

// True when `p` has a repetition, frequency or presence penalty.
bool HasPenalties(const SamplingParams& p);

// True when `p` has a processor that edits logits (bias or a penalty).
bool HasLogitEdits(const SamplingParams& p);

LogitEditParams LogitEditParamsOf(const SamplingParams& p);

// Appends one edit per distinct token the processors of `p` touch: the
// logit_bias ids; with a penalty, the output's ids; with a repetition
// penalty, the prompt's distinct ids (`prompt` may be null, as for the host
// Sampler). Ids outside [0, vocab) are left out, as the host skips them.
void AppendLogitEdits(const SamplingParams& p, const PromptTokenSet* prompt, const OutputTokenCounts& output,
                      int32_t vocab, std::vector<LogitEdit>* edits);

// The host's application of `edits` to one row (what the device kernel does).
void ApplyLogitEdits(std::span<const LogitEdit> edits, const LogitEditParams& p, std::span<float> logits);

// One sample's edits, kept current as its output grows, so that a step
// copies them instead of rebuilding them: one hash lookup a kept token,
// where AppendLogitEdits walks the prompt and the output. For 256 rows of
// 128 prompt + 128 output tokens, rebuilding took 1.0 ms a step on one core;
// keeping them took 0.06 ms a step, and copying them out 0.08 ms.
class SampleLogitEdits {
 public:
  // The edits of an empty output. `params` must outlive this (the request's).
  SampleLogitEdits(const SamplingParams& params, const PromptTokenSet* prompt, int32_t vocab);

  // Records one kept output token (with OutputTokenCounts::Add).
  void AddOutputToken(int32_t token_id);

  std::span<const LogitEdit> edits() const { return edits_; }
  // Which of edits() touches `token_id`, or -1.
  int32_t EditIndexOf(int32_t token_id) const {
    const auto it = index_.find(token_id);
    return it == index_.end() ? -1 : it->second;
  }
  LogitEditParams params() const { return LogitEditParamsOf(*params_); }
  int64_t num_output_tokens() const { return num_output_tokens_; }

 private:
  const SamplingParams* params_;
  int32_t vocab_;
  bool penalized_;                               // output tokens are edited
  std::vector<LogitEdit> edits_;
  absl::flat_hash_map<int32_t, int32_t> index_;  // token id -> its edit
  int64_t num_output_tokens_ = 0;
};

}  // namespace ernie
