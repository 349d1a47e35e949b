// Per-sequence KV bookkeeping over a BlockPool: block tables, automatic
// prefix caching and prefix sharing between sequences (vLLM v1's
// KVCacheManager, for one attention type).
//
// Life of a sequence (SequenceId is chosen by the scheduler, unique while live):
//   hit = FindCachedPrefix(prompt)          // longest cached prefix, read-only
//   StartSequence(id, hit, n)               // attach hit, reserve slots for n tokens
//   ... backend writes KV for positions [computed, n) ...
//   CommitComputedTokens(id, tokens, n)     // full blocks enter the prefix cache
//   AllocateSlots(id, n + k)                // grow for the next step (decode, chunk)
//   ForkSequence(id, child)                 // n > 1 samples share the prompt's blocks
//   FreeSequence(id)                        // finished, aborted or preempted
//
// Slot and block rules:
//   * Token position p of a sequence lives in block_table[p / block_size],
//     row p % block_size. The table a backend reads is BlockTable(id).
//   * Block tables only grow while a sequence lives; FreeSequence releases
//     them whole (preemption is by recomputation).
//   * Sharing invariant (why there is no copy-on-write): a sequence writes KV
//     only at positions >= its computed-token count, so every block wholly
//     below that count is immutable. Only such full blocks are ever shared (by
//     prefix hits and forks); the block a sequence still writes into has
//     ref_count 1 and no hash. A fork whose parent ends mid-block gets its own
//     new tail block plus a BlockCopy the backend must perform first.
//   * A prefix hit never covers the whole prompt: at least the last prompt
//     token is recomputed so the step produces logits for it.
//
// Prefix-cache counters count TOKENS (as vLLM does), and only for sequences
// actually started (a FindCachedPrefix retried every step while a request
// waits is not counted again).
//
// Thread-safety: none. The engine thread owns the manager; no method may be
// called concurrently. Spans returned by BlockTable are invalidated by the
// next mutating call on that sequence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/kv/block_hash.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/kv_cache_geometry.h"

namespace ernie::kv {

using SequenceId = int64_t;

struct KvCacheManagerOptions {
  int32_t num_blocks = 0;                  // from PlanKvCacheCapacity
  int32_t block_size = kDefaultBlockSize;  // tokens per block
  bool enable_prefix_caching = true;
  SipHashKey prefix_hash_key = kDefaultPrefixHashKey;  // see block_hash.h
};

// The longest cached prefix of a prompt. Valid until the next mutating call
// on the manager; StartSequence rejects a stale one.
struct PrefixHit {
  std::vector<int32_t> block_ids;       // cached blocks, in prompt order
  std::vector<BlockHash> block_hashes;  // their chained hashes, same order
  int32_t num_cached_tokens = 0;        // block_ids.size() * block_size
  int32_t num_prompt_tokens = 0;        // the prompt length that was looked up
  BlockHash extra_key = kNoExtraKey;    // the extra key that was looked up
};

// KV rows the backend must copy before the destination block is written:
// rows [0, num_tokens) of src_block into dst_block, every layer, K and V.
struct BlockCopy {
  int32_t src_block = 0;
  int32_t dst_block = 0;
  int32_t num_tokens = 0;
};

struct ForkResult {
  std::optional<BlockCopy> tail_copy;  // set when the parent ended mid-block
};

// Monotonic counters (Prometheus counters) for the prefix cache.
struct PrefixCacheStats {
  int64_t num_started_sequences = 0;  // StartSequence successes
  int64_t num_queried_tokens = 0;     // sum of their prompt lengths
  int64_t num_hit_tokens = 0;         // of those, tokens served from the cache
  int64_t num_evicted_blocks = 0;     // cached blocks reused for other content
};

class KvCacheManager {
 public:
  // InvalidArgument for a bad block count or block size.
  static absl::StatusOr<KvCacheManager> Create(const KvCacheManagerOptions& options);

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  bool prefix_caching_enabled() const { return enable_prefix_caching_; }
  int32_t num_sequences() const { return static_cast<int32_t>(sequences_.size()); }
  // Fraction of blocks owned by live sequences, in [0, 1].
  double Usage() const;
  PrefixCacheStats stats() const;
  const BlockPool& pool() const { return pool_; }

  // Longest run of cached full blocks at the start of `prompt` under
  // `extra_key`, capped at (prompt.size() - 1) / block_size blocks. Read-only;
  // empty when caching is off or the prompt is empty.
  PrefixHit FindCachedPrefix(absl::Span<const int32_t> prompt,
                             const BlockHash& extra_key = kNoExtraKey) const;

  // Begins tracking `id`: attaches `hit`'s blocks (shared, ref_count + 1) and
  // reserves slots for its first `num_total_tokens` tokens (cached ones
  // included). Returns the newly allocated block ids, or std::nullopt when
  // the free blocks do not suffice (nothing changed, `id` not tracked).
  // Errors: AlreadyExists (id live), InvalidArgument (num_total_tokens below
  // the hit), FailedPrecondition (stale hit), ResourceExhausted (the sequence
  // needs more blocks than the whole pool: it can never run).
  absl::StatusOr<std::optional<std::vector<int32_t>>> StartSequence(SequenceId id,
                                                                    const PrefixHit& hit,
                                                                    int32_t num_total_tokens);

  // Grows `id`'s table to hold `num_total_tokens` tokens (computed plus those
  // scheduled now). Returns the new block ids (empty when it already fits),
  // or std::nullopt when the free blocks do not suffice (nothing changed; the
  // scheduler preempts). Errors: NotFound, ResourceExhausted as above.
  absl::StatusOr<std::optional<std::vector<int32_t>>> AllocateSlots(SequenceId id,
                                                                    int32_t num_total_tokens);

  // Records that KV for the first `num_computed_tokens` tokens of `id` is
  // written. `tokens` are the sequence's token ids (prompt then generated),
  // at least num_computed_tokens of them. Every block that became full is
  // hashed and offered to the prefix cache. The count never decreases and
  // cannot pass the reserved slots (else InvalidArgument/FailedPrecondition).
  absl::Status CommitComputedTokens(SequenceId id, absl::Span<const int32_t> tokens,
                                    int32_t num_computed_tokens);

  // Makes `child` a copy of `parent`'s computed tokens without copying KV:
  // the parent's full computed blocks are shared (ref_count + 1). When the
  // parent's computed count ends mid-block, the child gets a fresh tail block
  // and the result names the copy the backend must do before the child's
  // next step. std::nullopt when no block is free for that tail (nothing
  // changed). Errors: NotFound (parent), AlreadyExists (child).
  absl::StatusOr<std::optional<ForkResult>> ForkSequence(SequenceId parent, SequenceId child);

  // Stops tracking `id` and releases its blocks, tail first, so the cached
  // prefix outlives the sequence's own tail in the LRU order. NotFound if
  // not live.
  absl::Status FreeSequence(SequenceId id);

  // `id`'s block table: block ids for positions [0, size * block_size).
  absl::StatusOr<absl::Span<const int32_t>> BlockTable(SequenceId id) const;
  absl::StatusOr<int32_t> NumComputedTokens(SequenceId id) const;

  // The pool's invariants plus: every block's ref_count equals its number of
  // block-table references; committed hashes match the blocks' stored hashes;
  // a sequence's writable blocks (index >= computed / block_size) are
  // unshared and unhashed; computed tokens fit the reserved slots.
  // O(num_blocks + total table length). Called after every mutating call in
  // debug builds (#ifndef NDEBUG) and by tests explicitly.
  absl::Status CheckInvariants() const;

 private:
  struct SequenceState {
    std::vector<int32_t> block_table;     // position p -> block_table[p / block_size]
    std::vector<BlockHash> block_hashes;  // chained hashes of the first full blocks
    int32_t num_computed_tokens = 0;      // KV written for positions [0, this)
    BlockHash extra_key = kNoExtraKey;    // folded into every block hash
  };

  KvCacheManager(BlockPool pool, const KvCacheManagerOptions& options);

  int32_t BlocksFor(int64_t num_tokens) const;
  absl::Status CheckFitsPool(int64_t num_tokens) const;
  absl::Status CheckHitIsFresh(const PrefixHit& hit) const;
  void DebugCheckInvariants() const;

  BlockPool pool_;                 // owns every block id
  int32_t block_size_;             // tokens per block
  bool enable_prefix_caching_;     // off: nothing is hashed or looked up
  SipHashKey prefix_hash_key_;     // key of every block hash
  absl::flat_hash_map<SequenceId, SequenceState> sequences_;  // live sequences
  int64_t num_started_sequences_ = 0;
  int64_t num_queried_tokens_ = 0;
  int64_t num_hit_tokens_ = 0;
};

}  // namespace ernie::kv
