// A test double of a device-sampling backend: the CPU backend's logits,
// then every row sampled as the CUDA backend does it (HostRowSampler: edits
// of the row, the min_tokens ban by id, the host Sampler with no processor
// left; logprobs of the raw row). Shared by the engine's device-sampling and overlapped-step
// tests.
#pragma once

#include <string_view>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/host_row_sampler.h"
#include "engine/sample/logit_edit.h"

namespace ernie {

class HostSamplingBackend : public Backend {
 public:
  explicit HostSamplingBackend(Backend* inner)
      : inner_(inner),
        sampler_(*HostRowSampler::Create(static_cast<int32_t>(inner->vocab_size()))) {}

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
    std::vector<DeviceSampleRow> rows(request.rows.begin(), request.rows.end());
    for (const DeviceSampleRow& row : rows) {
      // A ban in force must come with its ids (eos + stop ids), as a device needs them.
      const bool banning = row.position < static_cast<uint64_t>(row.params->min_tokens);
      if (banning && (row.banned_ids->empty() || row.banned_ids->front() != 2))
        return absl::InvalidArgumentError("a min_tokens row reached the device without its banned ids");
    }
    if (!raw_pass) {
      // The wrong variant: edit the logits rows here, so the logprobs are
      // those of the edited row (once a row: a fork's samples share it).
      std::vector<bool> edited(batch.logit_token_indices.size(), false);
      for (DeviceSampleRow& row : rows) {
        if (row.edits == nullptr) continue;
        if (!edited[static_cast<size_t>(row.logit_row)])
          ApplyLogitEdits(row.edits->edits(), row.edits->params(),
                          std::span<float>(logits).subspan(static_cast<size_t>(row.logit_row) * vocab, vocab));
        edited[static_cast<size_t>(row.logit_row)] = true;
        row.edits = nullptr;
      }
    }
    if (absl::Status s = sampler_.Sample(logits, rows, sampled); !s.ok()) return s;
    device_rows = sampler_.rows_sampled();
    edited_rows = sampler_.edited_rows();
    raw_passes = sampler_.raw_passes();
    return absl::OkStatus();
  }

  int64_t device_rows = 0, edited_rows = 0, raw_passes = 0, launches = 0, fed_back_tokens = 0;
  bool overlaps = false;
  bool raw_pass = true;  // false: logprobs of the edited row (wrong; shows the test can tell)

 private:
  Backend* inner_;
  HostRowSampler sampler_;
};

}  // namespace ernie
