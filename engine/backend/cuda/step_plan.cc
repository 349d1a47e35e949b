#include "engine/backend/cuda/step_plan.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/attention_items.h"

namespace ernie::cuda {

absl::StatusOr<StepInputs> StepInputs::Create(int64_t max_tokens, int64_t max_table_entries) {
  StepInputs s;
  s.max_tokens_ = max_tokens;
  s.max_table_entries_ = max_table_entries;
  const auto total = static_cast<size_t>(kTables * max_tokens + max_table_entries + 2 * max_tokens);
  for (PinnedBuffer<int32_t>& staging : s.staging_) {
    ERNIE_ASSIGN_OR_RETURN(staging, PinnedBuffer<int32_t>::Allocate(total, "step input staging"));
  }
  ERNIE_ASSIGN_OR_RETURN(s.device_, DeviceBuffer<int32_t>::Allocate(total, "step inputs"));
  return s;
}

absl::Status StepInputs::Upload(const StepBatch& batch, int32_t block_size, int32_t gqa_group, int32_t rows_per_item,
                               cudaStream_t stream) {
  const auto tokens = static_cast<int64_t>(batch.token_ids.size());
  const auto logit_rows = static_cast<int64_t>(batch.logit_token_indices.size());
  if (logit_rows > max_tokens_)
    return absl::InvalidArgumentError(
        absl::StrCat("step batch asks for ", logit_rows, " logit rows; the backend was sized for ", max_tokens_));
  int32_t* host = staging_[next_staging_].data();
  next_staging_ ^= 1;
  const size_t n = static_cast<size_t>(tokens);
  std::memcpy(host + kTokenIds * max_tokens_, batch.token_ids.data(), n * sizeof(int32_t));
  std::memcpy(host + kPositions * max_tokens_, batch.positions.data(), n * sizeof(int32_t));
  if (logit_rows > 0)
    std::memcpy(host + kLogitRows * max_tokens_, batch.logit_token_indices.data(),
                static_cast<size_t>(logit_rows) * sizeof(int32_t));

  // Attention items take up to rows_per_item query rows: one decode's heads,
  // or a run of a prefill chunk's tokens.
  const int32_t tokens_per_item = std::max<int32_t>(1, rows_per_item / gqa_group);
  int32_t* slots = host + kSlots * max_tokens_;
  auto* items = reinterpret_cast<AttentionWorkItem*>(host + kItems * max_tokens_);
  int32_t* tables = host + kTables * max_tokens_;
  int64_t entries = 0;
  num_items_ = 0;
  num_single_token_items_ = 0;
  for (const SequenceSlice& seq : batch.sequences) {
    const int64_t context = int64_t{seq.num_cached_tokens} + seq.num_new_tokens;
    const int64_t needed = (context + block_size - 1) / block_size;
    if (entries + needed > max_table_entries_)
      return absl::InvalidArgumentError(absl::StrCat("step batch needs more than ", max_table_entries_,
                                                     " block-table entries (CudaBackendOptions::max_blocks_per_step)"));
    std::memcpy(tables + entries, seq.block_table.data(), static_cast<size_t>(needed) * sizeof(int32_t));
    for (int32_t j = 0; j < seq.num_new_tokens; ++j) {
      const int64_t pos = int64_t{seq.num_cached_tokens} + j;
      slots[seq.first_token + j] = seq.block_table[static_cast<size_t>(pos / block_size)] * block_size +
                                   static_cast<int32_t>(pos % block_size);
    }
    const int32_t written =
        WriteSequenceItems(seq, tokens_per_item, static_cast<int32_t>(entries), items + num_items_);
    num_single_token_items_ +=
        static_cast<int32_t>(std::count_if(items + num_items_, items + num_items_ + written,
                                           [](const AttentionWorkItem& item) { return item.num_tokens == 1; }));
    num_items_ += written;
    entries += needed;
  }
  fed_back_offset_ = kTables * max_tokens_ + entries;
  num_fed_back_ = static_cast<int32_t>(batch.fed_back_tokens.size());
  for (int32_t i = 0; i < num_fed_back_; ++i) {
    host[fed_back_offset_ + 2 * i] = batch.fed_back_tokens[static_cast<size_t>(i)].token_index;
    host[fed_back_offset_ + 2 * i + 1] = batch.fed_back_tokens[static_cast<size_t>(i)].sample_row;
  }
  const size_t bytes = static_cast<size_t>(fed_back_offset_ + 2 * num_fed_back_) * sizeof(int32_t);
  return CudaStatus(cudaMemcpyAsync(device_.data(), host, bytes, cudaMemcpyHostToDevice, stream),
                    "cudaMemcpyAsync of step inputs");
}

}  // namespace ernie::cuda
