#include "engine/kv/block_pool.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/kv/kv_cache_geometry.h"
#include "engine/util/status_macros.h"

namespace ernie::kv {

absl::StatusOr<BlockPool> BlockPool::Create(int32_t num_blocks) {
  if (num_blocks < 1 || num_blocks > kMaxNumBlocks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "BlockPool: num_blocks must be in [1, %d], got %d", kMaxNumBlocks, num_blocks));
  }
  return BlockPool(num_blocks);
}

BlockPool::BlockPool(int32_t num_blocks)
    : num_blocks_(num_blocks),
      sentinel_(num_blocks),
      blocks_(static_cast<size_t>(num_blocks) + 1),
      seen_scratch_(static_cast<size_t>(num_blocks), 0) {
  blocks_[sentinel_].prev = sentinel_;
  blocks_[sentinel_].next = sentinel_;
  // Ascending ids at start, so a fresh pool hands out 0, 1, 2, ...
  for (int32_t block = 0; block < num_blocks_; ++block) PushBack(block);
}

absl::Status BlockPool::CheckId(int32_t block) const {
  if (block < 0 || block >= num_blocks_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("BlockPool: block id %d out of range [0, %d)", block, num_blocks_));
  }
  return absl::OkStatus();
}

void BlockPool::Unlink(int32_t block) {
  BlockMeta& meta = blocks_[block];
  blocks_[meta.prev].next = meta.next;
  blocks_[meta.next].prev = meta.prev;
  meta.prev = meta.next = block;
  --num_free_blocks_;
}

void BlockPool::PushFront(int32_t block) {
  const int32_t old_head = blocks_[sentinel_].next;
  blocks_[block].prev = sentinel_;
  blocks_[block].next = old_head;
  blocks_[old_head].prev = block;
  blocks_[sentinel_].next = block;
  ++num_free_blocks_;
}

void BlockPool::PushBack(int32_t block) {
  const int32_t old_tail = blocks_[sentinel_].prev;
  blocks_[block].prev = old_tail;
  blocks_[block].next = sentinel_;
  blocks_[old_tail].next = block;
  blocks_[sentinel_].prev = block;
  ++num_free_blocks_;
}

std::optional<std::vector<int32_t>> BlockPool::Allocate(int32_t n) {
  if (n < 0 || n > num_free_blocks_) return std::nullopt;
  std::vector<int32_t> taken;
  taken.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t block = blocks_[sentinel_].next;
    Unlink(block);
    BlockMeta& meta = blocks_[block];
    if (meta.has_hash) {  // evict: its KV is about to be overwritten
      cached_blocks_.erase(meta.hash);
      meta.has_hash = false;
      meta.hash = BlockHash{};
      ++num_evicted_blocks_;
    }
    meta.ref_count = 1;
    taken.push_back(block);
  }
  DebugCheckInvariants();
  return taken;
}

absl::Status BlockPool::Touch(absl::Span<const int32_t> blocks) {
  for (const int32_t block : blocks) {
    ERNIE_RETURN_IF_ERROR(CheckId(block));
    if (blocks_[block].ref_count == 0 && !blocks_[block].has_hash) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "BlockPool::Touch: block %d is free and uncached; it holds no KV to share", block));
    }
  }
  for (const int32_t block : blocks) {
    BlockMeta& meta = blocks_[block];
    if (meta.ref_count == 0) Unlink(block);  // revive a cached-free block
    ++meta.ref_count;
  }
  DebugCheckInvariants();
  return absl::OkStatus();
}

absl::Status BlockPool::Free(absl::Span<const int32_t> blocks) {
  absl::Status status = absl::OkStatus();
  size_t checked = 0;
  for (; checked < blocks.size(); ++checked) {
    const int32_t block = blocks[checked];
    status = CheckId(block);
    if (!status.ok()) break;
    if (blocks_[block].ref_count == 0) {
      status = absl::FailedPreconditionError(
          absl::StrFormat("BlockPool::Free: block %d is not owned (ref_count 0)", block));
      break;
    }
    if (seen_scratch_[block] != 0) {
      status = absl::InvalidArgumentError(
          absl::StrFormat("BlockPool::Free: block %d listed twice", block));
      break;
    }
    seen_scratch_[block] = 1;
  }
  for (size_t i = 0; i < checked; ++i) seen_scratch_[blocks[i]] = 0;
  ERNIE_RETURN_IF_ERROR(status);

  for (const int32_t block : blocks) {
    BlockMeta& meta = blocks_[block];
    if (--meta.ref_count > 0) continue;
    if (meta.has_hash) {
      PushBack(block);
    } else {
      PushFront(block);
    }
  }
  DebugCheckInvariants();
  return absl::OkStatus();
}

std::optional<int32_t> BlockPool::FindCached(const BlockHash& hash) const {
  const auto it = cached_blocks_.find(hash);
  if (it == cached_blocks_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<bool> BlockPool::CacheBlock(int32_t block, const BlockHash& hash) {
  ERNIE_RETURN_IF_ERROR(CheckId(block));
  BlockMeta& meta = blocks_[block];
  if (meta.ref_count == 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("BlockPool::CacheBlock: block %d is not owned", block));
  }
  if (meta.has_hash) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "BlockPool::CacheBlock: block %d already cached as %s", block, meta.hash.ToHex()));
  }
  if (!cached_blocks_.try_emplace(hash, block).second) return false;
  meta.has_hash = true;
  meta.hash = hash;
  DebugCheckInvariants();
  return true;
}

std::optional<BlockHash> BlockPool::hash_of(int32_t block) const {
  if (!blocks_[block].has_hash) return std::nullopt;
  return blocks_[block].hash;
}

std::vector<int32_t> BlockPool::FreeListInEvictionOrder() const {
  std::vector<int32_t> order;
  order.reserve(static_cast<size_t>(num_free_blocks_));
  for (int32_t block = blocks_[sentinel_].next; block != sentinel_; block = blocks_[block].next) {
    order.push_back(block);
  }
  return order;
}

absl::Status BlockPool::CheckInvariants() const {
  std::vector<uint8_t> listed(static_cast<size_t>(num_blocks_), 0);
  int32_t list_length = 0;
  int32_t previous = sentinel_;
  for (int32_t block = blocks_[sentinel_].next; block != sentinel_; block = blocks_[block].next) {
    if (block < 0 || block >= num_blocks_) {
      return absl::InternalError(absl::StrFormat("free list links to bad id %d", block));
    }
    if (listed[block] != 0) {
      return absl::InternalError(absl::StrFormat("block %d is in the free list twice", block));
    }
    if (blocks_[block].prev != previous) {
      return absl::InternalError(absl::StrFormat(
          "block %d: prev link %d, expected %d", block, blocks_[block].prev, previous));
    }
    listed[block] = 1;
    ++list_length;
    previous = block;
  }
  if (blocks_[sentinel_].prev != previous) {
    return absl::InternalError("free list tail link does not match the last block");
  }
  if (list_length != num_free_blocks_) {
    return absl::InternalError(absl::StrFormat("free list holds %d blocks, counter says %d",
                                               list_length, num_free_blocks_));
  }
  int32_t num_owned = 0;
  int32_t num_hashed = 0;
  for (int32_t block = 0; block < num_blocks_; ++block) {
    const BlockMeta& meta = blocks_[block];
    if (meta.ref_count < 0) {
      return absl::InternalError(
          absl::StrFormat("block %d has negative ref_count %d", block, meta.ref_count));
    }
    if ((meta.ref_count == 0) != (listed[block] != 0)) {
      return absl::InternalError(absl::StrFormat(
          "block %d: ref_count %d but %s the free list", block, meta.ref_count,
          listed[block] != 0 ? "in" : "not in"));
    }
    if (meta.ref_count > 0) ++num_owned;
    if (meta.has_hash) {
      ++num_hashed;
      const auto it = cached_blocks_.find(meta.hash);
      if (it == cached_blocks_.end() || it->second != block) {
        return absl::InternalError(
            absl::StrFormat("block %d stores hash %s that the map does not give it", block,
                            meta.hash.ToHex()));
      }
    }
  }
  if (num_owned + num_free_blocks_ != num_blocks_) {
    return absl::InternalError(absl::StrFormat("%d owned + %d free != %d blocks", num_owned,
                                               num_free_blocks_, num_blocks_));
  }
  for (const auto& [hash, block] : cached_blocks_) {
    if (block < 0 || block >= num_blocks_ || !blocks_[block].has_hash ||
        !(blocks_[block].hash == hash)) {
      return absl::InternalError(absl::StrFormat(
          "map entry %s -> block %d does not match the block's stored hash", hash.ToHex(), block));
    }
  }
  if (num_hashed != static_cast<int32_t>(cached_blocks_.size())) {
    return absl::InternalError(absl::StrFormat("%d hashed blocks but %d map entries", num_hashed,
                                               cached_blocks_.size()));
  }
  return absl::OkStatus();
}

void BlockPool::DebugCheckInvariants() const {
#ifndef NDEBUG
  const absl::Status status = CheckInvariants();
  if (!status.ok()) {
    std::fprintf(stderr, "BlockPool invariant broken: %s\n", status.ToString().c_str());
    std::abort();
  }
#endif
}

}  // namespace ernie::kv
