// Storage for a paged KV cache in host memory, float32. Which block belongs
// to which sequence is the block pool's business (engine/kv); this only maps
// (layer, block, head, row) to memory.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"

namespace ernie::cpu {

class CpuKvCache {
 public:
  // ResourceExhausted when the allocation fails.
  static absl::StatusOr<CpuKvCache> Create(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }

  // Keys of one block and KV head: [block_size, head_dim] contiguous.
  float* keys(int64_t layer, int64_t block, int64_t head) { return data_.get() + Offset(layer, 0, block, head); }
  float* values(int64_t layer, int64_t block, int64_t head) { return data_.get() + Offset(layer, 1, block, head); }
  const float* keys(int64_t layer, int64_t block, int64_t head) const {
    return data_.get() + Offset(layer, 0, block, head);
  }
  const float* values(int64_t layer, int64_t block, int64_t head) const {
    return data_.get() + Offset(layer, 1, block, head);
  }

 private:
  // Layout: [layer][k|v][block][kv_head][row][head_dim], so one head's rows of
  // a block are contiguous for the attention loop.
  int64_t Offset(int64_t layer, int64_t kv, int64_t block, int64_t head) const {
    return ((((layer * 2 + kv) * shape_.num_blocks + block) * shape_.num_kv_heads + head) * shape_.block_size) *
           shape_.head_dim;
  }

  KvCacheShape shape_;
  std::unique_ptr<float[]> data_;  // shape_.total_bytes() / 4 floats, uninitialised until written
};

}  // namespace ernie::cpu
