// How a sequence's new tokens in a step become attention work items
// (paged_kv_view.h): runs of up to tokens_per_item tokens, every item of the
// sequence carrying its first position computed in this step, the bound of
// the keys the attention may request before the kernel that writes this
// step's K and V has finished. Host logic only (StepInputs::Upload calls it).
#pragma once

#include <cstdint>

#include "engine/backend/cuda/paged_kv_view.h"
#include "engine/backend/step_batch.h"

namespace ernie::cuda {

// Writes seq's items to `out` (room for seq.num_new_tokens of them; each
// reads the sequence's block table at `block_table_offset`) and returns how
// many it wrote. tokens_per_item >= 1.
int32_t WriteSequenceItems(const SequenceSlice& seq, int32_t tokens_per_item, int32_t block_table_offset,
                           AttentionWorkItem* out);

}  // namespace ernie::cuda
