// A backend that produces tokens instantly, for measuring everything around
// the model (scheduler, sampler, streaming, gateway) at rates no real model
// reaches on this machine. Selected by `--backend instant`, never a default.
//
// It is a real implementation of the Backend contract: it validates every
// batch, and its "model" is a fixed function of the context: the logits of a
// row favour token (last_token * 31 + position) % vocab, so outputs are
// deterministic, depend on the prompt, and differ between sequences.
//
// It samples "on its device" (HostRowSampler) and its launches overlap like
// a GPU's: a launched step's pace runs from when the step before it ends,
// and only WaitForSamples waits for it. So the engine's overlapped steps,
// and what they hide of the host's work, can be measured here.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/backend/host_row_sampler.h"

namespace ernie {

struct InstantBackendOptions {
  int64_t vocab_size = 512;
  int64_t block_size = 16;
  int64_t num_blocks = 4096;
  int64_t max_tokens_per_step = 8192;
  // A step's pace: each Forward lasts at least
  //   step_floor + token_cost x tokens + logit_row_cost x logit rows
  // (it sleeps out the rest), so the stack around it sees one token a stream
  // a step, and a scheduler whose steps cost what a device's would (fit the
  // three to a GPU's measured step times; tools/bench/run-serve-emulated).
  std::chrono::microseconds step_floor{0};
  std::chrono::nanoseconds token_cost{0};
  std::chrono::nanoseconds logit_row_cost{0};
};

class InstantBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<InstantBackend>> Create(const InstantBackendOptions& options);

  std::string_view name() const override { return "instant"; }
  const KvCacheShape& kv_shape() const override { return kv_; }
  int64_t vocab_size() const override { return vocab_; }
  int64_t max_tokens_per_step() const override { return max_tokens_; }
  absl::Status Forward(const StepBatch& batch, std::span<float> logits) override;
  absl::Status CopyBlocks(std::span<const BlockCopyOp> copies) override;
  bool SupportsDeviceSampling() const override { return true; }
  absl::Status ForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request,
                                std::span<SampledToken> sampled) override;
  absl::Status LaunchForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request) override;
  absl::Status WaitForSamples(std::span<SampledToken> sampled) override;
  bool OverlapsSteps() const override { return true; }

 private:
  using Clock = std::chrono::steady_clock;
  // A launched step: its results and when its paced "device" time ends.
  struct Launched {
    std::vector<SampledToken> sampled;
    Clock::time_point done;
  };

  InstantBackend(const InstantBackendOptions& o, HostRowSampler sampler);
  Clock::duration StepCost(const StepBatch& batch) const;
  // The token a row at `position` after `token` favours. Ids 0..2 (unk, bos,
  // eos) never are, so lengths are set by max_tokens.
  int32_t FavouredToken(int32_t token, int32_t position) const {
    return static_cast<int32_t>(3 + (int64_t{token} * 31 + position) % (vocab_ - 3));
  }
  // The favoured-token logits of the batch's logit rows.
  void FillLogits(const StepBatch& batch, std::span<const int32_t> token_ids, std::span<float> logits) const;
  // Runs a step at once: logits, then its rows sampled.
  absl::Status SampleStep(const StepBatch& batch, std::span<const int32_t> token_ids,
                          const DeviceSamplingRequest& request, std::span<SampledToken> sampled);

  KvCacheShape kv_;     // geometry only: no storage
  int64_t vocab_;
  int64_t max_tokens_;
  std::chrono::microseconds step_floor_;
  std::chrono::nanoseconds token_cost_;
  std::chrono::nanoseconds logit_row_cost_;
  HostRowSampler sampler_;
  std::vector<float> logits_;              // [rows, vocab] scratch
  std::deque<Launched> launched_;          // not yet waited for, oldest first
  LaunchedTokens last_launch_;             // the newest launch's sampled ids (fed-back tokens read them)
  Clock::time_point device_free_;          // when the last launched step's pace ends
};

}  // namespace ernie
