// Per-step host planning: the batch's integer inputs (token ids, positions,
// cache slots, logit rows, attention work items, block tables) laid out in
// one page-locked staging buffer and copied to the device in one transfer.
// Buffers are allocated once for the backend's limits; every region has a
// fixed device address, so later steps can be captured in CUDA graphs. Two
// staging buffers take turns, so a step's inputs can be written while the
// step before still waits for its copy (overlapped steps).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/paged_kv_view.h"
#include "engine/backend/step_batch.h"

namespace ernie::cuda {

class StepInputs {
 public:
  // `max_tokens`: most tokens (and logit rows) one step carries;
  // `max_table_entries`: most block-table entries one step carries.
  static absl::StatusOr<StepInputs> Create(int64_t max_tokens, int64_t max_table_entries);

  // Plans `batch` (already validated against the cache shape) and enqueues
  // the copy on `stream`. The staging buffers are reused every other call:
  // the step two uploads back must have finished. Fed-back tokens' pairs
  // are copied too (fed_back()).
  // InvalidArgument when the batch needs more block-table entries or logit
  // rows than the buffers hold. A work item takes up to `rows_per_item`
  // (token, head) query rows: the attention kernel's size.
  absl::Status Upload(const StepBatch& batch, int32_t block_size, int32_t gqa_group, int32_t rows_per_item,
                      cudaStream_t stream);

  // Device arrays of the last upload.
  const int32_t* token_ids() const { return device_.data() + kTokenIds * max_tokens_; }   // [tokens]
  const int32_t* positions() const { return device_.data() + kPositions * max_tokens_; }  // [tokens]
  const int32_t* slots() const { return device_.data() + kSlots * max_tokens_; }          // [tokens]
  const int32_t* logit_rows() const { return device_.data() + kLogitRows * max_tokens_; } // [logit rows]
  const AttentionWorkItem* items() const {                                                // [num_items]
    return reinterpret_cast<const AttentionWorkItem*>(device_.data() + kItems * max_tokens_);
  }
  const int32_t* block_tables() const { return device_.data() + kTables * max_tokens_; }  // [entries]
  // The token ids, for the kernel that writes fed-back tokens into them.
  int32_t* mutable_token_ids() { return device_.data() + kTokenIds * max_tokens_; }
  // [num_fed_back() x 2] (token index, previous sample row) of the last upload.
  const int32_t* fed_back() const { return device_.data() + fed_back_offset_; }
  int32_t num_fed_back() const { return num_fed_back_; }
  int32_t num_items() const { return num_items_; }
  // Items of one token (decodes, or a prefill chunk's last token when the
  // chunk is not a multiple of an item's tokens).
  int32_t num_single_token_items() const { return num_single_token_items_; }

 private:
  // Region starts, in units of max_tokens_ int32s; items take 4 per token.
  static constexpr int64_t kTokenIds = 0, kPositions = 1, kSlots = 2, kLogitRows = 3, kItems = 4, kTables = 8;

  int64_t max_tokens_ = 0;
  int64_t max_table_entries_ = 0;
  int32_t num_items_ = 0;
  int32_t num_single_token_items_ = 0;
  int64_t fed_back_offset_ = 0;    // the fed-back pairs follow the last upload's table entries
  int32_t num_fed_back_ = 0;
  PinnedBuffer<int32_t> staging_[2];  // host copies of the layout below, in turn
  int next_staging_ = 0;
  // [8 * max_tokens + max_table_entries + 2 * max_tokens] int32: regions as
  // above, then the fed-back pairs.
  DeviceBuffer<int32_t> device_;
};

}  // namespace ernie::cuda
