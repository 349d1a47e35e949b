// The pool of KV block ids, with reference counts, an LRU free list and the
// prefix-cache map (block hash -> cached block).
//
// Ownership: the pool owns every block id 0..num_blocks-1 and only hands out
// ids; the K/V tensors themselves live in a backend as [num_blocks, ...]
// arrays indexed by these ids.
//
// Every block is in exactly one state:
//   free         ref_count 0, in the free list, no hash;
//   cached-free  ref_count 0, in the free list, has a hash and is in the map
//                (its KV is still valid and can be revived by Touch);
//   owned        ref_count > 0 (one per block-table reference), not in the
//                free list; may have a hash (a full, committed block).
//
// The free list is in eviction order: Allocate takes from the head. Freed
// blocks without a hash hold nothing worth keeping, so they go to the head
// (reused first); freed cached blocks go to the tail (least recently used
// are evicted first). It is an intrusive doubly linked list over block ids,
// so a cached-free block revived from the middle is unlinked in O(1).
// Allocating a cached-free block evicts it: its hash is dropped.
//
// Thread-safety: none. The engine thread owns the pool (and the
// KvCacheManager that wraps it); no method may be called concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/kv/block_hash.h"

namespace ernie::kv {

class BlockPool {
 public:
  // InvalidArgument unless 1 <= num_blocks <= kMaxNumBlocks.
  static absl::StatusOr<BlockPool> Create(int32_t num_blocks);

  int32_t num_blocks() const { return num_blocks_; }
  // Free plus cached-free blocks: what Allocate can hand out right now.
  int32_t num_free_blocks() const { return num_free_blocks_; }
  // Blocks whose hash is in the prefix-cache map (owned or cached-free).
  int32_t num_cached_blocks() const { return static_cast<int32_t>(cached_blocks_.size()); }
  // Cached-free blocks evicted (hash dropped) by Allocate since creation.
  int64_t num_evicted_blocks() const { return num_evicted_blocks_; }

  // Takes `n` blocks from the head of the free list, each with ref_count 1,
  // evicting the hash of any cached-free one. Returns the ids in the order
  // taken, or std::nullopt (nothing changed) when fewer than `n` are free or
  // n < 0. Running out is normal: the scheduler preempts.
  [[nodiscard]] std::optional<std::vector<int32_t>> Allocate(int32_t n);

  // Adds one reference to each block (a cache hit or a shared prefix). A
  // cached-free block leaves the free list. Ids may repeat. Validates every
  // id first: InvalidArgument / FailedPrecondition (a free block without a
  // hash holds no KV worth referencing) and nothing changes.
  absl::Status Touch(absl::Span<const int32_t> blocks);

  // Drops one reference from each block, in the order given; a block whose
  // count reaches 0 joins the free list (see the ordering above). Pass a
  // sequence's blocks tail first so its tail is evicted before its prefix.
  // Ids must be distinct and owned, else InvalidArgument / FailedPrecondition
  // and nothing changes.
  absl::Status Free(absl::Span<const int32_t> blocks);

  // The cached block holding `hash`, if any (owned or cached-free).
  std::optional<int32_t> FindCached(const BlockHash& hash) const;

  // Registers owned, full `block` under `hash`. Returns false (nothing
  // changed) when another block already holds that hash: two sequences
  // computed the same prefix at once; the later block stays uncached and is
  // reused first once freed. FailedPrecondition when the block is not owned
  // or already has a hash.
  absl::StatusOr<bool> CacheBlock(int32_t block, const BlockHash& hash);

  // Introspection, for the manager, tests and debugging. Ids must be valid.
  int32_t ref_count(int32_t block) const { return blocks_[block].ref_count; }
  std::optional<BlockHash> hash_of(int32_t block) const;
  // The free list from head (next to be allocated) to tail. O(free blocks).
  std::vector<int32_t> FreeListInEvictionOrder() const;

  // Verifies the state model above: list links consistent and acyclic, no
  // block listed twice, listed <=> ref_count 0, free + owned == total, every
  // map entry points at a block storing that hash and every hashed block is
  // in the map. O(num_blocks). Internal error describing the first breach.
  // Debug builds (#ifndef NDEBUG) run it after every mutating call and abort
  // on a breach; tests call it explicitly.
  absl::Status CheckInvariants() const;

 private:
  struct BlockMeta {
    int32_t ref_count = 0;  // block-table references; 0 <=> in the free list
    int32_t prev = 0;       // free-list neighbours (sentinel = num_blocks_)
    int32_t next = 0;
    bool has_hash = false;  // `hash` is valid and registered in the map
    BlockHash hash;
  };

  explicit BlockPool(int32_t num_blocks);

  absl::Status CheckId(int32_t block) const;
  void Unlink(int32_t block);
  void PushFront(int32_t block);
  void PushBack(int32_t block);
  void DebugCheckInvariants() const;

  int32_t num_blocks_;            // ids are 0..num_blocks_-1
  int32_t sentinel_;              // == num_blocks_: the free list's head/tail anchor
  std::vector<BlockMeta> blocks_;  // num_blocks_ + 1 entries (last: sentinel)
  int32_t num_free_blocks_ = 0;   // length of the free list
  int64_t num_evicted_blocks_ = 0;
  absl::flat_hash_map<BlockHash, int32_t> cached_blocks_;  // hash -> block id
  std::vector<uint8_t> seen_scratch_;  // per-block marks for Free's duplicate check
};

}  // namespace ernie::kv
