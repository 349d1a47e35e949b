// A test double of a device-sampling backend: the CPU backend's logits,
// then every row sampled as the CUDA backend does it (edits of the row, the
// min_tokens ban by id, the host Sampler with no processor left; logprobs of
// the raw row). Shared by the engine's device-sampling and overlapped-step
// tests.
#pragma once

#include <string_view>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/sample/logit_edit.h"
#include "engine/sample/sampler.h"

namespace ernie {

// The CPU backend plus ForwardAndSample done with the host Sampler: what a
// device sampler must reproduce.
class HostSamplingBackend : public Backend {
 public:
  explicit HostSamplingBackend(Backend* inner)
      // The engine's eos ids, so min_tokens bans on "device" rows ban what the host would.
      : inner_(inner),
        sampler_(*Sampler::Create({.vocab_size = static_cast<int32_t>(inner->vocab_size()), .eos_token_ids = {2}})) {}

  std::string_view name() const override { return "host-sampling"; }
  const KvCacheShape& kv_shape() const override { return inner_->kv_shape(); }
  int64_t vocab_size() const override { return inner_->vocab_size(); }
  int64_t max_tokens_per_step() const override { return inner_->max_tokens_per_step(); }
  absl::Status Forward(const StepBatch& batch, std::span<float> logits) override {
    return inner_->Forward(batch, logits);
  }
  absl::Status CopyBlocks(std::span<const BlockCopyOp> copies) override { return inner_->CopyBlocks(copies); }
  bool SupportsDeviceSampling() const override { return true; }
  // As a device running behind the host would say: the engine then
  // overlaps its steps (Backend's default launch runs the step at once).
  bool OverlapsSteps() const override { return overlaps; }
  absl::Status LaunchForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request) override {
    fed_back_tokens += static_cast<int64_t>(batch.fed_back_tokens.size());
    ++launches;
    return Backend::LaunchForwardAndSample(batch, request);
  }

  absl::Status ForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request,
                                std::span<SampledToken> sampled) override {
    if (absl::Status s = ValidateDeviceSamplingRequest(batch, request, sampled); !s.ok()) return s;
    const auto vocab = static_cast<size_t>(vocab_size());
    std::vector<float> logits(batch.logit_token_indices.size() * vocab);
    if (absl::Status s = inner_->Forward(batch, logits); !s.ok()) return s;
    for (size_t i = 0; i < request.rows.size(); ++i) {
      const DeviceSampleRow& row = request.rows[i];
      // A ban in force must come with its ids (eos + stop ids), as a device needs them.
      const bool banning = row.position < static_cast<uint64_t>(row.params->min_tokens);
      if (banning && (row.banned_ids->empty() || row.banned_ids->front() != 2))
        return absl::InvalidArgumentError("a min_tokens row reached the device without its banned ids");
      // The processors as the device does them: edits of the row, from the
      // tokens the row points at, then a sampler that sees no processor but
      // the ban (the Sampler bans the same ids after the other processors).
      SamplingParams plain = *row.params;
      plain.logit_bias.clear();
      plain.repetition_penalty = 1.0f;
      plain.frequency_penalty = plain.presence_penalty = 0.0f;
      SamplerRow host_row{.params = &plain, .seed = row.seed, .sample_index = row.sample_index};
      for (uint64_t p = 0; p < row.position; ++p) host_row.output.Add(0);  // only the count is read
      const std::vector<float> raw(logits.begin() + static_cast<ptrdiff_t>(row.logit_row * vocab),
                                   logits.begin() + static_cast<ptrdiff_t>((row.logit_row + 1) * vocab));
      std::vector<float> one = raw;
      const bool edited = row.edits != nullptr && !row.edits->edits().empty();
      if (edited) {  // ValidateDeviceSamplingRequest: current, and present whenever needed
        ApplyLogitEdits(row.edits->edits(), row.edits->params(), one);
        ++edited_rows;
      }
      const SamplerRow* rows[] = {&host_row};
      auto got = sampler_.Sample(one, rows);
      if (!got.ok()) return got.status();
      sampled[i] = (*got)[0];
      if (edited && plain.logprobs && raw_pass) {
        // The device's raw pass: log-probabilities of the unedited row. The
        // same Sampler on it, greedy, with a bias that makes the drawn token
        // the argmax (logprobs are taken before any processor).
        SamplingParams forced = plain;
        forced.temperature = 0.0f;
        forced.min_tokens = 0;
        forced.logit_bias = {{sampled[i].token_id, 1e30f}};
        SamplerRow raw_row{.params = &forced};
        std::vector<float> copy = raw;
        const SamplerRow* raw_rows[] = {&raw_row};
        auto from_raw = sampler_.Sample(copy, raw_rows);
        if (!from_raw.ok()) return from_raw.status();
        if ((*from_raw)[0].token_id != sampled[i].token_id) return absl::InternalError("the forced draw missed");
        sampled[i].logprob = (*from_raw)[0].logprob;
        sampled[i].top_logprobs = (*from_raw)[0].top_logprobs;
        ++raw_passes;
      }
      ++device_rows;
    }
    return absl::OkStatus();
  }

  int64_t device_rows = 0, edited_rows = 0, raw_passes = 0, launches = 0, fed_back_tokens = 0;
  bool overlaps = false;
  bool raw_pass = true;  // false: logprobs of the edited row (wrong; shows the test can tell)

 private:
  Backend* inner_;
  Sampler sampler_;
};

}  // namespace ernie
