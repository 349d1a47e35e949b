#include "engine/backend/cpu/cpu_kv_cache.h"

#include <new>

#include "absl/strings/str_cat.h"

namespace ernie::cpu {

absl::StatusOr<CpuKvCache> CpuKvCache::Create(const KvCacheShape& shape) {
  if (shape.bytes_per_element != 4)
    return absl::InvalidArgumentError("the CPU KV cache stores float32 (bytes_per_element 4)");
  if (shape.num_blocks <= 0 || shape.block_size <= 0)
    return absl::InvalidArgumentError("KV cache needs at least one block of at least one token");
  CpuKvCache cache;
  cache.shape_ = shape;
  try {
    // Not zero-filled: every slot is written before it is read, and untouched
    // pages of a large pool then cost nothing.
    cache.data_.reset(new float[static_cast<size_t>(shape.total_bytes() / 4)]);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", shape.total_bytes(), " bytes of KV cache"));
  }
  return cache;
}

}  // namespace ernie::cpu
