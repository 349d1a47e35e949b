#include "engine/backend/host_row_sampler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/sample/logit_edit.h"
#include "engine/util/status_macros.h"

namespace ernie {

absl::StatusOr<HostRowSampler> HostRowSampler::Create(int32_t vocab_size) {
  // No eos ids of its own: a row's ban names every id it bans.
  ERNIE_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create({.vocab_size = vocab_size, .eos_token_ids = {}}));
  return HostRowSampler(std::move(sampler), vocab_size);
}

absl::Status HostRowSampler::Sample(std::span<const float> logits, std::span<const DeviceSampleRow> rows,
                                    std::span<SampledToken> out) {
  const auto vocab = static_cast<size_t>(vocab_);
  if (out.size() != rows.size())
    return absl::InvalidArgumentError(absl::StrCat("host row sampler: ", rows.size(), " rows, room for ", out.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    const DeviceSampleRow& row = rows[i];
    if (row.params == nullptr || row.logit_row < 0 || (static_cast<size_t>(row.logit_row) + 1) * vocab > logits.size())
      return absl::InvalidArgumentError(absl::StrCat("host row sampler: row ", i, " has no params or logits row"));
    // The device's order: edits of the row, then a sampler that sees no
    // processor but the ban (which the Sampler applies after the bias and
    // before the penalties, where the edits already stand).
    SamplingParams plain = *row.params;
    plain.logit_bias.clear();
    plain.repetition_penalty = 1.0f;
    plain.frequency_penalty = plain.presence_penalty = 0.0f;
    const bool banning = row.position < static_cast<uint64_t>(plain.min_tokens);
    plain.stop_token_ids = banning && row.banned_ids != nullptr ? *row.banned_ids : std::vector<int32_t>{};
    SamplerRow host_row{.params = &plain, .seed = row.seed, .sample_index = row.sample_index};
    // Only the count (the draw's position) is read: no penalty is left.
    host_row.output.Add(0, static_cast<int32_t>(row.position));
    const auto raw = logits.subspan(static_cast<size_t>(row.logit_row) * vocab, vocab);
    row_.assign(raw.begin(), raw.end());
    const bool edited = row.edits != nullptr && !row.edits->edits().empty();
    if (edited) {
      ApplyLogitEdits(row.edits->edits(), row.edits->params(), row_);
      ++edited_rows_;
    }
    const SamplerRow* sampler_rows[] = {&host_row};
    ERNIE_ASSIGN_OR_RETURN(std::vector<SampledToken> drawn, sampler_.Sample(row_, sampler_rows));
    out[i] = std::move(drawn[0]);
    ++rows_sampled_;
    if (!edited || !plain.logprobs) continue;
    // The raw pass: log-probabilities of the unedited row. The same Sampler,
    // greedy, with a bias that makes the drawn token the argmax (logprobs
    // are taken before any processor).
    SamplingParams forced = plain;
    forced.temperature = 0.0f;
    forced.min_tokens = 0;
    forced.stop_token_ids.clear();
    forced.logit_bias = {{out[i].token_id, 1e30f}};
    SamplerRow raw_row{.params = &forced};
    raw_.assign(raw.begin(), raw.end());
    const SamplerRow* raw_rows[] = {&raw_row};
    ERNIE_ASSIGN_OR_RETURN(std::vector<SampledToken> from_raw, sampler_.Sample(raw_, raw_rows));
    if (from_raw[0].token_id != out[i].token_id) return absl::InternalError("host row sampler: the forced draw missed");
    out[i].logprob = from_raw[0].logprob;
    out[i].top_logprobs = std::move(from_raw[0].top_logprobs);
    ++raw_passes_;
  }
  return absl::OkStatus();
}

}  // namespace ernie
