#include "engine/backend/cuda/attention_items.h"

#include <algorithm>

namespace ernie::cuda {

int32_t WriteSequenceItems(const SequenceSlice& seq, int32_t tokens_per_item, int32_t block_table_offset,
                           AttentionWorkItem* out) {
  int32_t written = 0;
  for (int32_t j = 0; j < seq.num_new_tokens; j += tokens_per_item) {
    // Every item of a chunk gets the chunk's first position, not its own
    // first token's: the chunk's earlier items' keys are this step's too.
    out[written++] = AttentionWorkItem{.token_begin = seq.first_token + j,
                                       .num_tokens = std::min(tokens_per_item, seq.num_new_tokens - j),
                                       .block_table_offset = block_table_offset,
                                       .first_new_position = seq.num_cached_tokens};
  }
  return written;
}

}  // namespace ernie::cuda
