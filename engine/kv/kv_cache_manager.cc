#include "engine/kv/kv_cache_manager.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/util/status_macros.h"

namespace ernie::kv {

absl::StatusOr<KvCacheManager> KvCacheManager::Create(const KvCacheManagerOptions& options) {
  if (options.block_size < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KvCacheManager: block_size must be at least 1, got %d", options.block_size));
  }
  ERNIE_ASSIGN_OR_RETURN(BlockPool pool, BlockPool::Create(options.num_blocks));
  return KvCacheManager(std::move(pool), options);
}

KvCacheManager::KvCacheManager(BlockPool pool, const KvCacheManagerOptions& options)
    : pool_(std::move(pool)),
      block_size_(options.block_size),
      enable_prefix_caching_(options.enable_prefix_caching),
      prefix_hash_key_(options.prefix_hash_key) {}

double KvCacheManager::Usage() const {
  return static_cast<double>(pool_.num_blocks() - pool_.num_free_blocks()) / pool_.num_blocks();
}

PrefixCacheStats KvCacheManager::stats() const {
  return PrefixCacheStats{
      .num_started_sequences = num_started_sequences_,
      .num_queried_tokens = num_queried_tokens_,
      .num_hit_tokens = num_hit_tokens_,
      .num_evicted_blocks = pool_.num_evicted_blocks(),
  };
}

int32_t KvCacheManager::BlocksFor(int64_t num_tokens) const {
  return static_cast<int32_t>((num_tokens + block_size_ - 1) / block_size_);
}

absl::Status KvCacheManager::CheckFitsPool(int64_t num_tokens) const {
  if (num_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("KvCacheManager: token count must not be negative, got %d", num_tokens));
  }
  if (num_tokens > int64_t{pool_.num_blocks()} * block_size_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "KvCacheManager: a sequence of %d tokens needs %d blocks but the KV cache has only %d "
        "(%d tokens)",
        num_tokens, (num_tokens + block_size_ - 1) / block_size_, pool_.num_blocks(),
        int64_t{pool_.num_blocks()} * block_size_));
  }
  return absl::OkStatus();
}

PrefixHit KvCacheManager::FindCachedPrefix(absl::Span<const int32_t> prompt,
                                           const BlockHash& extra_key) const {
  PrefixHit hit;
  hit.num_prompt_tokens = static_cast<int32_t>(prompt.size());
  hit.extra_key = extra_key;
  if (!enable_prefix_caching_ || prompt.empty()) return hit;
  // The last prompt token is always recomputed, so logits exist for it.
  const size_t max_blocks = (prompt.size() - 1) / static_cast<size_t>(block_size_);
  BlockHash parent = kRootBlockHash;
  for (size_t i = 0; i < max_blocks; ++i) {
    const BlockHash hash = HashBlockTokens(
        prefix_hash_key_, parent, extra_key,
        prompt.subspan(i * static_cast<size_t>(block_size_), static_cast<size_t>(block_size_)));
    const std::optional<int32_t> block = pool_.FindCached(hash);
    if (!block.has_value()) break;
    hit.block_ids.push_back(*block);
    hit.block_hashes.push_back(hash);
    parent = hash;
  }
  hit.num_cached_tokens = static_cast<int32_t>(hit.block_ids.size()) * block_size_;
  return hit;
}

absl::Status KvCacheManager::CheckHitIsFresh(const PrefixHit& hit) const {
  const bool shape_ok =
      hit.block_ids.size() == hit.block_hashes.size() &&
      int64_t{hit.num_cached_tokens} == static_cast<int64_t>(hit.block_ids.size()) * block_size_ &&
      (hit.block_ids.empty() || hit.num_cached_tokens < hit.num_prompt_tokens) &&
      (enable_prefix_caching_ || hit.block_ids.empty());
  if (!shape_ok) {
    return absl::InvalidArgumentError(
        "KvCacheManager::StartSequence: the PrefixHit was not made by FindCachedPrefix");
  }
  for (size_t i = 0; i < hit.block_ids.size(); ++i) {
    const int32_t block = hit.block_ids[i];
    if (block < 0 || block >= pool_.num_blocks() || pool_.hash_of(block) != hit.block_hashes[i]) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "KvCacheManager::StartSequence: stale PrefixHit (block %d was evicted since the "
          "lookup); call FindCachedPrefix again in the same step",
          block));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::vector<int32_t>>> KvCacheManager::StartSequence(
    SequenceId id, const PrefixHit& hit, int32_t num_total_tokens) {
  if (sequences_.contains(id)) {
    return absl::AlreadyExistsError(
        absl::StrFormat("KvCacheManager::StartSequence: sequence %d is already live", id));
  }
  ERNIE_RETURN_IF_ERROR(CheckHitIsFresh(hit));
  if (num_total_tokens < hit.num_cached_tokens) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KvCacheManager::StartSequence: %d tokens requested, fewer than the %d cached ones",
        num_total_tokens, hit.num_cached_tokens));
  }
  ERNIE_RETURN_IF_ERROR(CheckFitsPool(num_total_tokens));

  // Reviving cached-free hit blocks takes them off the free list too.
  int32_t num_revived = 0;
  for (const int32_t block : hit.block_ids) {
    if (pool_.ref_count(block) == 0) ++num_revived;
  }
  const int32_t num_new = BlocksFor(num_total_tokens) - static_cast<int32_t>(hit.block_ids.size());
  if (num_new + num_revived > pool_.num_free_blocks()) return std::nullopt;

  // Touch before Allocate, so allocation cannot evict the hit blocks.
  ERNIE_RETURN_IF_ERROR(pool_.Touch(hit.block_ids));
  std::optional<std::vector<int32_t>> new_blocks = pool_.Allocate(num_new);
  if (!new_blocks.has_value()) {
    return absl::InternalError("KvCacheManager::StartSequence: free count lied to allocation");
  }
  SequenceState& state = sequences_[id];
  state.block_table = hit.block_ids;
  state.block_table.insert(state.block_table.end(), new_blocks->begin(), new_blocks->end());
  state.block_hashes = hit.block_hashes;
  state.num_computed_tokens = hit.num_cached_tokens;
  state.extra_key = hit.extra_key;

  ++num_started_sequences_;
  num_queried_tokens_ += hit.num_prompt_tokens;
  num_hit_tokens_ += hit.num_cached_tokens;
  DebugCheckInvariants();
  return new_blocks;
}

absl::StatusOr<std::optional<std::vector<int32_t>>> KvCacheManager::AllocateSlots(
    SequenceId id, int32_t num_total_tokens) {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) {
    return absl::NotFoundError(
        absl::StrFormat("KvCacheManager::AllocateSlots: no live sequence %d", id));
  }
  ERNIE_RETURN_IF_ERROR(CheckFitsPool(num_total_tokens));
  std::vector<int32_t>& table = it->second.block_table;
  const int32_t num_new = BlocksFor(num_total_tokens) - static_cast<int32_t>(table.size());
  if (num_new <= 0) return std::vector<int32_t>{};  // tables never shrink
  std::optional<std::vector<int32_t>> new_blocks = pool_.Allocate(num_new);
  if (!new_blocks.has_value()) return std::nullopt;
  table.insert(table.end(), new_blocks->begin(), new_blocks->end());
  DebugCheckInvariants();
  return new_blocks;
}

absl::Status KvCacheManager::CommitComputedTokens(SequenceId id, absl::Span<const int32_t> tokens,
                                                  int32_t num_computed_tokens) {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) {
    return absl::NotFoundError(
        absl::StrFormat("KvCacheManager::CommitComputedTokens: no live sequence %d", id));
  }
  SequenceState& state = it->second;
  if (num_computed_tokens < state.num_computed_tokens) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "KvCacheManager::CommitComputedTokens: sequence %d already has %d computed tokens, "
        "cannot go back to %d",
        id, state.num_computed_tokens, num_computed_tokens));
  }
  const int64_t num_slots = static_cast<int64_t>(state.block_table.size()) * block_size_;
  if (num_computed_tokens > num_slots) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "KvCacheManager::CommitComputedTokens: sequence %d has slots for %d tokens, not %d", id,
        num_slots, num_computed_tokens));
  }
  if (tokens.size() < static_cast<size_t>(num_computed_tokens)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KvCacheManager::CommitComputedTokens: %d token ids given for %d computed tokens",
        tokens.size(), num_computed_tokens));
  }
  state.num_computed_tokens = num_computed_tokens;
  if (enable_prefix_caching_) {
    const size_t num_full = static_cast<size_t>(num_computed_tokens / block_size_);
    const size_t block_size = static_cast<size_t>(block_size_);
    for (size_t i = state.block_hashes.size(); i < num_full; ++i) {
      const BlockHash& parent = i == 0 ? kRootBlockHash : state.block_hashes[i - 1];
      const BlockHash hash = HashBlockTokens(prefix_hash_key_, parent, state.extra_key,
                                             tokens.subspan(i * block_size, block_size));
      state.block_hashes.push_back(hash);
      // false: another block already caches this prefix; this one stays private.
      ERNIE_RETURN_IF_ERROR(pool_.CacheBlock(state.block_table[i], hash).status());
    }
  }
  DebugCheckInvariants();
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ForkResult>> KvCacheManager::ForkSequence(SequenceId parent,
                                                                       SequenceId child) {
  const auto parent_it = sequences_.find(parent);
  if (parent_it == sequences_.end()) {
    return absl::NotFoundError(
        absl::StrFormat("KvCacheManager::ForkSequence: no live parent sequence %d", parent));
  }
  if (sequences_.contains(child)) {
    return absl::AlreadyExistsError(
        absl::StrFormat("KvCacheManager::ForkSequence: child sequence %d is already live", child));
  }
  const SequenceState& source = parent_it->second;
  const int32_t num_full = source.num_computed_tokens / block_size_;
  const int32_t tail_tokens = source.num_computed_tokens % block_size_;

  ForkResult result;
  std::vector<int32_t> table(source.block_table.begin(), source.block_table.begin() + num_full);
  if (tail_tokens > 0) {
    std::optional<std::vector<int32_t>> tail = pool_.Allocate(1);
    if (!tail.has_value()) return std::nullopt;
    result.tail_copy = BlockCopy{.src_block = source.block_table[num_full],
                                 .dst_block = tail->front(),
                                 .num_tokens = tail_tokens};
  }
  // Shared blocks are full and below both sequences' computed counts, so
  // neither ever writes them again: sharing needs no copy-on-write.
  ERNIE_RETURN_IF_ERROR(pool_.Touch(table));
  if (result.tail_copy.has_value()) table.push_back(result.tail_copy->dst_block);

  SequenceState state;
  state.block_table = std::move(table);
  const size_t num_hashes = std::min(source.block_hashes.size(), static_cast<size_t>(num_full));
  state.block_hashes.assign(source.block_hashes.begin(), source.block_hashes.begin() + num_hashes);
  state.num_computed_tokens = source.num_computed_tokens;
  state.extra_key = source.extra_key;
  // Inserting may rehash the map; `source` is not used after this line.
  sequences_.emplace(child, std::move(state));
  DebugCheckInvariants();
  return result;
}

absl::Status KvCacheManager::FreeSequence(SequenceId id) {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) {
    return absl::NotFoundError(
        absl::StrFormat("KvCacheManager::FreeSequence: no live sequence %d", id));
  }
  std::vector<int32_t> tail_first(it->second.block_table.rbegin(), it->second.block_table.rend());
  sequences_.erase(it);
  ERNIE_RETURN_IF_ERROR(pool_.Free(tail_first));
  DebugCheckInvariants();
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<const int32_t>> KvCacheManager::BlockTable(SequenceId id) const {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) {
    return absl::NotFoundError(
        absl::StrFormat("KvCacheManager::BlockTable: no live sequence %d", id));
  }
  return absl::Span<const int32_t>(it->second.block_table);
}

absl::StatusOr<int32_t> KvCacheManager::NumComputedTokens(SequenceId id) const {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) {
    return absl::NotFoundError(
        absl::StrFormat("KvCacheManager::NumComputedTokens: no live sequence %d", id));
  }
  return it->second.num_computed_tokens;
}

absl::Status KvCacheManager::CheckInvariants() const {
  ERNIE_RETURN_IF_ERROR(pool_.CheckInvariants());
  std::vector<int32_t> references(static_cast<size_t>(pool_.num_blocks()), 0);
  for (const auto& [id, state] : sequences_) {
    const int64_t num_slots = static_cast<int64_t>(state.block_table.size()) * block_size_;
    if (state.num_computed_tokens < 0 || state.num_computed_tokens > num_slots) {
      return absl::InternalError(absl::StrFormat("sequence %d: %d computed tokens, %d slots", id,
                                                 state.num_computed_tokens, num_slots));
    }
    const size_t num_full = static_cast<size_t>(state.num_computed_tokens / block_size_);
    const size_t expected_hashes = enable_prefix_caching_ ? num_full : 0;
    if (state.block_hashes.size() != expected_hashes) {
      return absl::InternalError(absl::StrFormat("sequence %d: %d block hashes, expected %d", id,
                                                 state.block_hashes.size(), expected_hashes));
    }
    for (size_t i = 0; i < state.block_table.size(); ++i) {
      const int32_t block = state.block_table[i];
      if (block < 0 || block >= pool_.num_blocks()) {
        return absl::InternalError(
            absl::StrFormat("sequence %d: block table entry %d is bad id %d", id, i, block));
      }
      ++references[block];
      const std::optional<BlockHash> stored = pool_.hash_of(block);
      if (i < state.block_hashes.size()) {
        if (stored.has_value() && !(*stored == state.block_hashes[i])) {
          return absl::InternalError(absl::StrFormat(
              "sequence %d: block %d stores hash %s, the sequence committed %s", id, block,
              stored->ToHex(), state.block_hashes[i].ToHex()));
        }
      } else if (i >= num_full && (stored.has_value() || pool_.ref_count(block) != 1)) {
        return absl::InternalError(absl::StrFormat(
            "sequence %d: writable block %d (table index %d) is shared or hashed (ref_count %d)",
            id, block, i, pool_.ref_count(block)));
      }
    }
  }
  for (int32_t block = 0; block < pool_.num_blocks(); ++block) {
    if (references[block] != pool_.ref_count(block)) {
      return absl::InternalError(absl::StrFormat("block %d: ref_count %d but %d table references",
                                                 block, pool_.ref_count(block), references[block]));
    }
  }
  return absl::OkStatus();
}

void KvCacheManager::DebugCheckInvariants() const {
#ifndef NDEBUG
  const absl::Status status = CheckInvariants();
  if (!status.ok()) {
    std::fprintf(stderr, "KvCacheManager invariant broken: %s\n", status.ToString().c_str());
    std::abort();
  }
#endif
}

}  // namespace ernie::kv
