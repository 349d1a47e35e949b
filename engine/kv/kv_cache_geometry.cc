#include "engine/kv/kv_cache_geometry.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "engine/util/status_macros.h"

namespace ernie::kv {
namespace {

// Upper bounds keep every product far below 2^63: at most
// 2^12 * 2^12 * 2^16 * 2 * 2^4 = 2^45 bytes per token, 2^59 per block.
constexpr int32_t kMaxLayers = 1 << 12;
constexpr int32_t kMaxKvHeads = 1 << 12;
constexpr int32_t kMaxHeadDim = 1 << 16;
constexpr int32_t kMaxDtypeBytes = 16;
constexpr int32_t kMaxBlockSize = 1 << 14;

absl::Status CheckRange(const char* name, int32_t value, int32_t max_value) {
  if (value < 1 || value > max_value) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KV cache geometry: %s must be in [1, %d], got %d", name, max_value, value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status KvCacheGeometry::Validate() const {
  ERNIE_RETURN_IF_ERROR(CheckRange("num_layers", num_layers, kMaxLayers));
  ERNIE_RETURN_IF_ERROR(CheckRange("num_kv_heads", num_kv_heads, kMaxKvHeads));
  ERNIE_RETURN_IF_ERROR(CheckRange("head_dim", head_dim, kMaxHeadDim));
  ERNIE_RETURN_IF_ERROR(CheckRange("dtype_bytes", dtype_bytes, kMaxDtypeBytes));
  ERNIE_RETURN_IF_ERROR(CheckRange("block_size", block_size, kMaxBlockSize));
  return absl::OkStatus();
}

int64_t KvCacheGeometry::BytesPerToken() const {
  return int64_t{num_layers} * num_kv_heads * head_dim * 2 * dtype_bytes;
}

int64_t KvCacheGeometry::BytesPerBlock() const { return BytesPerToken() * block_size; }

std::string KvCacheCapacity::ToString() const {
  return absl::StrFormat(
      "KV cache: %d blocks x %d tokens = %d tokens, %.1f MiB (%d bytes/token, %d bytes/block)",
      num_blocks, block_size, num_tokens(), static_cast<double>(num_bytes()) / (1024.0 * 1024.0),
      bytes_per_token, bytes_per_block);
}

absl::StatusOr<KvCacheCapacity> PlanKvCacheCapacity(const KvCacheGeometry& geometry,
                                                    int64_t budget_bytes) {
  ERNIE_RETURN_IF_ERROR(geometry.Validate());
  if (budget_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("KV cache budget must not be negative, got %d bytes", budget_bytes));
  }
  const int64_t bytes_per_block = geometry.BytesPerBlock();
  const int64_t num_blocks = budget_bytes / bytes_per_block;
  if (num_blocks < 1) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "KV cache budget of %d bytes cannot hold one block of %d bytes (%d tokens x %d "
        "bytes/token); free GPU memory or lower the block size",
        budget_bytes, bytes_per_block, geometry.block_size, geometry.BytesPerToken()));
  }
  return KvCacheCapacity{
      .num_blocks = static_cast<int32_t>(std::min<int64_t>(num_blocks, kMaxNumBlocks)),
      .block_size = geometry.block_size,
      .bytes_per_token = geometry.BytesPerToken(),
      .bytes_per_block = bytes_per_block,
  };
}

}  // namespace ernie::kv
