// The paged KV cache as kernels see it: plain pointers and sizes, passed by
// value. One layer's keys and values, each [num_blocks, num_kv_heads,
// block_size, head_dim] bf16, so the rows of one head in one block are
// contiguous (16-byte loads along head_dim). Block ids come from the
// scheduler's block pool; a token at position p of a sequence lives in block
// block_table[p / block_size], row p % block_size.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace ernie::cuda {

struct PagedKvView {
  __nv_bfloat16* k = nullptr;  // [num_blocks, num_kv_heads, block_size, head_dim]
  __nv_bfloat16* v = nullptr;  // [num_blocks, num_kv_heads, block_size, head_dim]
  int32_t num_blocks = 0;
  int32_t num_kv_heads = 0;
  int32_t block_size = 0;
  int32_t head_dim = 0;
};

// Offset of (block, head, row) in a PagedKvView array, in elements.
__host__ __device__ inline int64_t KvOffset(const PagedKvView& kv, int64_t block, int64_t head, int64_t row) {
  return ((block * kv.num_kv_heads + head) * kv.block_size + row) * kv.head_dim;
}

// One unit of attention work: a run of consecutive new tokens of one
// sequence (a decode is one token), against that sequence's cached keys.
struct AttentionWorkItem {
  int32_t token_begin = 0;         // first token (index into the step's tokens)
  int32_t num_tokens = 0;          // tokens in this item: num_tokens * gqa_group <= kAttentionRowsPerCta
  int32_t block_table_offset = 0;  // where the sequence's block table starts in the step's block-table array
  // The sequence's first position computed in this step (its cached
  // tokens): its keys before it are of earlier steps, the rest the kernel
  // before the attention writes. Not the item's first token's position: a
  // prefill chunk is cut into several items, whose later ones see keys of
  // the same step before their own tokens. 0 (nothing earlier) is safe.
  int32_t first_new_position = 0;
};

}  // namespace ernie::cuda
