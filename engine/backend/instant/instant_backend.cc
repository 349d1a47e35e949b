#include "engine/backend/instant/instant_backend.h"

#include <algorithm>
#include <thread>

#include "engine/util/status_macros.h"

namespace ernie {

absl::StatusOr<std::unique_ptr<InstantBackend>> InstantBackend::Create(const InstantBackendOptions& o) {
  if (o.vocab_size < 4 || o.block_size < 1 || o.num_blocks < 1 || o.max_tokens_per_step < 1)
    return absl::InvalidArgumentError("instant backend: vocab >= 4, block size, blocks and step tokens >= 1");
  if (o.step_floor.count() < 0 || o.token_cost.count() < 0 || o.logit_row_cost.count() < 0)
    return absl::InvalidArgumentError("instant backend: step floor, token cost and logit row cost must be >= 0");
  return std::unique_ptr<InstantBackend>(new InstantBackend(o));
}

InstantBackend::InstantBackend(const InstantBackendOptions& o)
    : kv_{.num_layers = 1, .num_kv_heads = 1, .head_dim = 1, .block_size = o.block_size,
          .num_blocks = o.num_blocks, .bytes_per_element = 0},
      vocab_(o.vocab_size),
      max_tokens_(o.max_tokens_per_step),
      step_floor_(o.step_floor),
      token_cost_(o.token_cost),
      logit_row_cost_(o.logit_row_cost) {}

absl::Status InstantBackend::Forward(const StepBatch& batch, std::span<float> logits) {
  const auto deadline = std::chrono::steady_clock::now() + step_floor_ +
                        token_cost_ * static_cast<int64_t>(batch.token_ids.size()) +
                        logit_row_cost_ * static_cast<int64_t>(batch.logit_token_indices.size());
  ERNIE_RETURN_IF_ERROR(ValidateStepBatch(batch, kv_, max_tokens_, vocab_, logits));
  for (size_t r = 0; r < batch.logit_token_indices.size(); ++r) {
    const auto t = static_cast<size_t>(batch.logit_token_indices[r]);
    float* row = logits.data() + r * static_cast<size_t>(vocab_);
    std::fill(row, row + vocab_, 0.0f);
    // Token ids 0..2 (unk, bos, eos) are never favoured, so lengths are set by max_tokens.
    const int64_t favoured = 3 + (int64_t{batch.token_ids[t]} * 31 + batch.positions[t]) % (vocab_ - 3);
    row[favoured] = 8.0f;
  }
  std::this_thread::sleep_until(deadline);  // returns at once when the pace is 0
  return absl::OkStatus();
}

absl::Status InstantBackend::CopyBlocks(std::span<const BlockCopyOp> copies) {
  return ValidateBlockCopies(copies, kv_);
}

}  // namespace ernie
