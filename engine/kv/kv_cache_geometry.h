// Sizing of the paged KV cache: how many blocks fit in a byte budget.
//
// One block holds `block_size` consecutive token positions of one sequence,
// for every layer, K and V. A backend lays its cache out as
// [num_blocks, ...] arrays indexed by block id; this file only does the
// arithmetic so the start-up log and the block pool agree on the numbers.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ernie::kv {

inline constexpr int32_t kDefaultBlockSize = 16;  // tokens per block, as vLLM

// Block ids are int32 and the pool keeps one sentinel id past the last block.
inline constexpr int32_t kMaxNumBlocks = std::numeric_limits<int32_t>::max() - 1;

// What one token's KV costs, and how tokens are grouped into blocks.
struct KvCacheGeometry {
  int32_t num_layers = 0;    // layers that keep a KV cache
  int32_t num_kv_heads = 0;  // KV heads per layer (GQA: fewer than query heads)
  int32_t head_dim = 0;      // elements per head
  int32_t dtype_bytes = 2;   // bytes per element: 2 for bf16/f16, 1 for fp8
  int32_t block_size = kDefaultBlockSize;  // tokens per block

  // InvalidArgument naming the first field out of range.
  absl::Status Validate() const;

  // layers * kv_heads * head_dim * 2 (K and V) * dtype_bytes. Validate first.
  int64_t BytesPerToken() const;
  // BytesPerToken() * block_size.
  int64_t BytesPerBlock() const;
};

// The cache a budget buys, in blocks, tokens and bytes.
struct KvCacheCapacity {
  int32_t num_blocks = 0;
  int32_t block_size = 0;       // tokens per block
  int64_t bytes_per_token = 0;  // all layers, K and V
  int64_t bytes_per_block = 0;

  int64_t num_tokens() const { return int64_t{num_blocks} * block_size; }
  int64_t num_bytes() const { return int64_t{num_blocks} * bytes_per_block; }

  // One line for the start-up log, e.g.
  // "KV cache: 1024 blocks x 16 tokens = 16384 tokens, 288.0 MiB
  //  (18432 bytes/token, 294912 bytes/block)".
  std::string ToString() const;
};

// Blocks that fit in `budget_bytes` (rounded down, capped at kMaxNumBlocks).
// InvalidArgument for a bad geometry or a negative budget; ResourceExhausted
// when the budget cannot hold even one block.
absl::StatusOr<KvCacheCapacity> PlanKvCacheCapacity(const KvCacheGeometry& geometry,
                                                    int64_t budget_bytes);

}  // namespace ernie::kv
