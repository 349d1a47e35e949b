// The seam between the scheduler and the math. A backend owns the model's
// weights in its own memory, the KV cache storage ([num_blocks, ...] per
// layer, addressed by block ids the scheduler's block pool hands out) and
// every workspace; the scheduler owns which block belongs to whom.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "engine/backend/step_batch.h"

namespace ernie {

// Geometry of a paged KV cache.
struct KvCacheShape {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;  // tokens per block
  int64_t num_blocks = 0;
  int64_t bytes_per_element = 4;

  int64_t bytes_per_token() const { return num_layers * num_kv_heads * head_dim * 2 * bytes_per_element; }
  int64_t bytes_per_block() const { return bytes_per_token() * block_size; }
  int64_t total_bytes() const { return bytes_per_block() * num_blocks; }
};

// Copy rows [0, num_tokens) of src_block's keys and values, every layer,
// into dst_block (a forked sequence's private tail block).
struct BlockCopyOp {
  int32_t src_block = 0;
  int32_t dst_block = 0;
  int32_t num_tokens = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;
  virtual const KvCacheShape& kv_shape() const = 0;
  virtual int64_t vocab_size() const = 0;
  // Most tokens one Forward may carry (the workspaces are sized for it).
  virtual int64_t max_tokens_per_step() const = 0;

  // Runs one step: writes the batch's keys and values into the cache, and
  // logits for logit_token_indices into `logits`
  // ([logit_token_indices.size(), vocab_size()], row-major). InvalidArgument
  // for a malformed batch (block ids out of range, too many tokens, a
  // position beyond the block table); the cache is then left unchanged for
  // sequences not yet processed, but the batch as a whole must be retried.
  virtual absl::Status Forward(const StepBatch& batch, std::span<float> logits) = 0;

  // Performs block copies before the next Forward. InvalidArgument for ids
  // outside the pool or num_tokens beyond a block.
  virtual absl::Status CopyBlocks(std::span<const BlockCopyOp> copies) = 0;
};

// Checks copies against a cache shape (shared by backends).
absl::Status ValidateBlockCopies(std::span<const BlockCopyOp> copies, const KvCacheShape& kv);

// Checks a batch against a cache shape and a token limit (shared by backends).
absl::Status ValidateStepBatch(const StepBatch& batch, const KvCacheShape& kv, int64_t max_tokens,
                               int64_t vocab_size, std::span<const float> logits);

}  // namespace ernie
