// A backend that produces tokens instantly, for measuring everything around
// the model (scheduler, sampler, streaming, gateway) at rates no real model
// reaches on this machine. Selected by `--backend instant`, never a default.
//
// It is a real implementation of the Backend contract: it validates every
// batch, and its "model" is a fixed function of the context: the logits of a
// row favour token (last_token * 31 + position) % vocab, so outputs are
// deterministic, depend on the prompt, and differ between sequences.
#pragma once

#include <chrono>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"

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

 private:
  InstantBackend(const InstantBackendOptions& o);

  KvCacheShape kv_;     // geometry only: no storage
  int64_t vocab_;
  int64_t max_tokens_;
  std::chrono::microseconds step_floor_;
  std::chrono::nanoseconds token_cost_;
  std::chrono::nanoseconds logit_row_cost_;
};

}  // namespace ernie
