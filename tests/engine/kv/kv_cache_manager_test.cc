#include "engine/kv/kv_cache_manager.h"

#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ernie::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

KvCacheManager MakeManager(int32_t num_blocks, int32_t block_size, bool caching = true) {
  absl::StatusOr<KvCacheManager> manager = KvCacheManager::Create(
      {.num_blocks = num_blocks, .block_size = block_size, .enable_prefix_caching = caching});
  EXPECT_TRUE(manager.ok()) << manager.status();
  return *std::move(manager);
}

std::vector<int32_t> Range(int32_t first, int32_t count) {
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Starts `id` on `prompt` with slots for the whole prompt, computes it and
// commits it. Returns the new block ids.
std::vector<int32_t> StartAndPrefill(KvCacheManager& manager, SequenceId id,
                                     const std::vector<int32_t>& prompt,
                                     const BlockHash& extra_key = kNoExtraKey) {
  const PrefixHit hit = manager.FindCachedPrefix(prompt, extra_key);
  absl::StatusOr<std::optional<std::vector<int32_t>>> blocks =
      manager.StartSequence(id, hit, static_cast<int32_t>(prompt.size()));
  EXPECT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_TRUE(blocks->has_value());
  EXPECT_TRUE(manager.CommitComputedTokens(id, prompt, static_cast<int32_t>(prompt.size())).ok());
  EXPECT_TRUE(manager.CheckInvariants().ok()) << manager.CheckInvariants();
  return blocks->value_or(std::vector<int32_t>{});
}

std::vector<int32_t> Table(const KvCacheManager& manager, SequenceId id) {
  const absl::StatusOr<absl::Span<const int32_t>> table = manager.BlockTable(id);
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? std::vector<int32_t>(table->begin(), table->end()) : std::vector<int32_t>{};
}

// Pool of 7 blocks of 4 tokens throughout, with odd prompt lengths.
TEST(KvCacheManagerTest, SecondRequestHitsFullBlocksOnly) {
  KvCacheManager manager = MakeManager(7, 4);
  const std::vector<int32_t> prompt = Range(100, 10);  // blocks [0..3][4..7][8 9]
  EXPECT_THAT(StartAndPrefill(manager, 1, prompt), ElementsAre(0, 1, 2));
  EXPECT_TRUE(manager.pool().hash_of(0).has_value());
  EXPECT_TRUE(manager.pool().hash_of(1).has_value());
  EXPECT_FALSE(manager.pool().hash_of(2).has_value());  // partial: never shared

  const PrefixHit hit = manager.FindCachedPrefix(prompt);
  EXPECT_THAT(hit.block_ids, ElementsAre(0, 1));
  EXPECT_EQ(hit.num_cached_tokens, 8);
  const absl::StatusOr<std::optional<std::vector<int32_t>>> blocks =
      manager.StartSequence(2, hit, 10);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  ASSERT_TRUE(blocks->has_value());
  EXPECT_THAT(**blocks, ElementsAre(3));
  EXPECT_THAT(Table(manager, 2), ElementsAre(0, 1, 3));
  EXPECT_EQ(*manager.NumComputedTokens(2), 8);
  EXPECT_EQ(manager.pool().ref_count(0), 2);
  EXPECT_EQ(manager.pool().ref_count(1), 2);
  EXPECT_EQ(manager.pool().ref_count(3), 1);
  EXPECT_EQ(manager.num_free_blocks(), 3);

  const PrefixCacheStats stats = manager.stats();
  EXPECT_EQ(stats.num_started_sequences, 2);
  EXPECT_EQ(stats.num_queried_tokens, 20);
  EXPECT_EQ(stats.num_hit_tokens, 8);
  EXPECT_TRUE(manager.CheckInvariants().ok()) << manager.CheckInvariants();
}

TEST(KvCacheManagerTest, LastPromptTokenIsAlwaysRecomputed) {
  KvCacheManager manager = MakeManager(7, 4);
  StartAndPrefill(manager, 1, Range(0, 12));  // three full blocks, all cached
  // A prompt that is exactly the cached 12 tokens reuses only 2 blocks: the
  // step must run at least token 11 to get logits.
  EXPECT_EQ(manager.FindCachedPrefix(Range(0, 12)).num_cached_tokens, 8);
  EXPECT_EQ(manager.FindCachedPrefix(Range(0, 13)).num_cached_tokens, 12);
  EXPECT_EQ(manager.FindCachedPrefix(Range(0, 9)).num_cached_tokens, 8);
  EXPECT_EQ(manager.FindCachedPrefix(Range(0, 8)).num_cached_tokens, 4);
  EXPECT_EQ(manager.FindCachedPrefix(Range(0, 1)).num_cached_tokens, 0);
  EXPECT_EQ(manager.FindCachedPrefix({}).num_cached_tokens, 0);
  // A different first block misses everything after it (hashes are chained).
  std::vector<int32_t> other = Range(0, 13);
  other[0] = 99;
  EXPECT_EQ(manager.FindCachedPrefix(other).num_cached_tokens, 0);
  // A different extra key (e.g. a LoRA adapter) is a different cache.
  const BlockHash lora = MakeExtraKey(kDefaultPrefixHashKey, {'a'});
  EXPECT_EQ(manager.FindCachedPrefix(Range(0, 13), lora).num_cached_tokens, 0);
}

TEST(KvCacheManagerTest, TwoHundredTokenSharedPrefix) {
  KvCacheManager manager = MakeManager(64, 16);
  const std::vector<int32_t> shared = Range(1000, 200);
  const std::vector<int32_t> prompt_a = Concat(shared, Range(5000, 37));  // 237 tokens
  const std::vector<int32_t> prompt_b = Concat(shared, Range(7000, 50));  // 250 tokens
  StartAndPrefill(manager, 1, prompt_a);
  const std::vector<int32_t> table_a = Table(manager, 1);
  ASSERT_EQ(table_a.size(), 15u);  // ceil(237 / 16)

  const PrefixHit hit = manager.FindCachedPrefix(prompt_b);
  // Block 12 holds tokens 192..207, which mix the shared prefix with A's own
  // tokens, so 12 blocks (192 tokens) are shared, not 200.
  EXPECT_EQ(hit.num_cached_tokens, 192);
  EXPECT_THAT(hit.block_ids, ElementsAreArray(table_a.begin(), table_a.begin() + 12));
  StartAndPrefill(manager, 2, prompt_b);
  const std::vector<int32_t> table_b = Table(manager, 2);
  ASSERT_EQ(table_b.size(), 16u);  // ceil(250 / 16)
  for (size_t i = 0; i < 16; ++i) {
    const int32_t expected_refs = i < 12 ? 2 : 1;
    EXPECT_EQ(manager.pool().ref_count(table_b[i]), expected_refs) << "block index " << i;
  }
  EXPECT_EQ(manager.stats().num_hit_tokens, 192);
  EXPECT_EQ(manager.stats().num_queried_tokens, 237 + 250);
  EXPECT_EQ(manager.num_free_blocks(), 64 - 15 - 4);

  ASSERT_TRUE(manager.FreeSequence(1).ok());
  ASSERT_TRUE(manager.FreeSequence(2).ok());
  EXPECT_EQ(manager.num_free_blocks(), 64);
  EXPECT_TRUE(manager.CheckInvariants().ok()) << manager.CheckInvariants();
}

TEST(KvCacheManagerTest, GeneratedTokensAreCommittedToo) {
  KvCacheManager manager = MakeManager(7, 4);
  std::vector<int32_t> tokens = Range(50, 6);
  StartAndPrefill(manager, 1, tokens);  // blocks 0 1; block 1 half full
  // Decode six tokens, one per step: reserve a slot, compute, commit.
  for (int32_t step = 0; step < 6; ++step) {
    tokens.push_back(900 + step);
    const absl::StatusOr<std::optional<std::vector<int32_t>>> grown =
        manager.AllocateSlots(1, static_cast<int32_t>(tokens.size()));
    ASSERT_TRUE(grown.ok() && grown->has_value());
    ASSERT_TRUE(manager.CommitComputedTokens(1, tokens, static_cast<int32_t>(tokens.size())).ok());
  }
  EXPECT_THAT(Table(manager, 1), ElementsAre(0, 1, 2));
  EXPECT_TRUE(manager.pool().hash_of(2).has_value());  // 12 tokens: three full blocks

  std::vector<int32_t> follow_up = tokens;
  follow_up.push_back(7);  // a multi-turn follow-up continues the transcript
  EXPECT_THAT(manager.FindCachedPrefix(follow_up).block_ids, ElementsAre(0, 1, 2));
}

TEST(KvCacheManagerTest, FreedSequenceTailIsEvictedBeforeItsPrefix) {
  KvCacheManager manager = MakeManager(7, 4);
  StartAndPrefill(manager, 1, Range(0, 13));    // blocks 0 1 2 cached, 3 partial
  StartAndPrefill(manager, 2, Range(100, 9));   // blocks 4 5 cached, 6 partial
  ASSERT_TRUE(manager.FreeSequence(1).ok());
  ASSERT_TRUE(manager.FreeSequence(2).ok());
  // Uncached partial blocks first, then sequence 1 tail to head, then 2.
  EXPECT_THAT(manager.pool().FreeListInEvictionOrder(), ElementsAre(6, 3, 2, 1, 0, 5, 4));

  // A new 12-token request needs 3 blocks: it takes 6, 3 and evicts 2.
  StartAndPrefill(manager, 3, Range(500, 12));
  EXPECT_THAT(Table(manager, 3), ElementsAre(6, 3, 2));
  EXPECT_EQ(manager.stats().num_evicted_blocks, 1);
  EXPECT_EQ(manager.FindCachedPrefix(Range(0, 13)).num_cached_tokens, 8);  // blocks 0 1 survive
  EXPECT_EQ(manager.FindCachedPrefix(Range(100, 9)).num_cached_tokens, 8);
}

TEST(KvCacheManagerTest, AllocationThatCannotFitHasNoSideEffects) {
  KvCacheManager manager = MakeManager(7, 4);
  StartAndPrefill(manager, 1, Range(0, 9));  // blocks 0 1 cached, 2 partial
  ASSERT_TRUE(manager.FreeSequence(1).ok());
  StartAndPrefill(manager, 2, Range(100, 12));  // takes 2, 3, 4
  StartAndPrefill(manager, 4, Range(300, 3));   // takes 5
  const std::vector<int32_t> free_before = manager.pool().FreeListInEvictionOrder();
  ASSERT_THAT(free_before, ElementsAre(6, 1, 0));

  // Sequence 2 growing to 28 tokens needs 4 more blocks; only 3 are free.
  const absl::StatusOr<std::optional<std::vector<int32_t>>> grow = manager.AllocateSlots(2, 28);
  ASSERT_TRUE(grow.ok()) << grow.status();
  EXPECT_FALSE(grow->has_value());
  EXPECT_THAT(Table(manager, 2), ElementsAre(2, 3, 4));
  EXPECT_EQ(manager.pool().FreeListInEvictionOrder(), free_before);

  // A request hitting cached-free blocks 0 1 and needing 3 more: the hit
  // blocks leave the free list too, so 5 > 3 and it cannot start.
  const PrefixHit hit = manager.FindCachedPrefix(Range(0, 20));
  ASSERT_THAT(hit.block_ids, ElementsAre(0, 1));
  const absl::StatusOr<std::optional<std::vector<int32_t>>> start =
      manager.StartSequence(3, hit, 20);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_FALSE(start->has_value());
  EXPECT_FALSE(manager.BlockTable(3).ok());
  EXPECT_EQ(manager.pool().FreeListInEvictionOrder(), free_before);
  EXPECT_EQ(manager.pool().ref_count(0), 0);
  EXPECT_EQ(manager.pool().num_cached_blocks(), 2 + 3);  // 0 1, and sequence 2's 2 3 4
  EXPECT_EQ(manager.stats().num_started_sequences, 3);
  EXPECT_TRUE(manager.CheckInvariants().ok()) << manager.CheckInvariants();

  // Scheduling only 12 of its tokens fits exactly: 0 1 revived, 6 allocated.
  const absl::StatusOr<std::optional<std::vector<int32_t>>> fits =
      manager.StartSequence(3, hit, 12);
  ASSERT_TRUE(fits.ok() && fits->has_value());
  EXPECT_THAT(**fits, ElementsAre(6));
  EXPECT_THAT(Table(manager, 3), ElementsAre(0, 1, 6));
  EXPECT_EQ(manager.num_free_blocks(), 0);
  EXPECT_EQ(manager.stats().num_evicted_blocks, 0);
}

TEST(KvCacheManagerTest, ForkSharesFullBlocksAndCopiesThePartialTail) {
  KvCacheManager manager = MakeManager(7, 4);
  StartAndPrefill(manager, 1, Range(0, 10));  // blocks 0 1 full, 2 holds 2 tokens
  const absl::StatusOr<std::optional<ForkResult>> fork = manager.ForkSequence(1, 2);
  ASSERT_TRUE(fork.ok()) << fork.status();
  ASSERT_TRUE(fork->has_value());
  ASSERT_TRUE((*fork)->tail_copy.has_value());
  EXPECT_EQ((*fork)->tail_copy->src_block, 2);
  EXPECT_EQ((*fork)->tail_copy->dst_block, 3);
  EXPECT_EQ((*fork)->tail_copy->num_tokens, 2);
  EXPECT_THAT(Table(manager, 2), ElementsAre(0, 1, 3));
  EXPECT_EQ(*manager.NumComputedTokens(2), 10);
  EXPECT_EQ(manager.pool().ref_count(0), 2);
  EXPECT_EQ(manager.pool().ref_count(2), 1);
  EXPECT_EQ(manager.pool().ref_count(3), 1);

  // The samples diverge: each writes its own tail block.
  std::vector<int32_t> tokens_1 = Concat(Range(0, 10), {77, 78, 79});
  std::vector<int32_t> tokens_2 = Concat(Range(0, 10), {88, 89, 90});
  ASSERT_TRUE(manager.AllocateSlots(1, 13).ok());
  ASSERT_TRUE(manager.AllocateSlots(2, 13).ok());
  ASSERT_TRUE(manager.CommitComputedTokens(1, tokens_1, 13).ok());
  ASSERT_TRUE(manager.CommitComputedTokens(2, tokens_2, 13).ok());
  EXPECT_THAT(Table(manager, 1), ElementsAre(0, 1, 2, 4));
  EXPECT_THAT(Table(manager, 2), ElementsAre(0, 1, 3, 5));
  EXPECT_TRUE(manager.CheckInvariants().ok()) << manager.CheckInvariants();

  ASSERT_TRUE(manager.FreeSequence(1).ok());
  EXPECT_EQ(manager.pool().ref_count(0), 1);  // still the child's
  ASSERT_TRUE(manager.FreeSequence(2).ok());
  EXPECT_EQ(manager.num_free_blocks(), 7);
  EXPECT_TRUE(manager.CheckInvariants().ok()) << manager.CheckInvariants();
}

TEST(KvCacheManagerTest, ForkOnABlockBoundaryCopiesNothing) {
  KvCacheManager manager = MakeManager(7, 4);
  StartAndPrefill(manager, 1, Range(0, 8));
  for (SequenceId child = 2; child <= 4; ++child) {  // n = 4 samples
    const absl::StatusOr<std::optional<ForkResult>> fork = manager.ForkSequence(1, child);
    ASSERT_TRUE(fork.ok() && fork->has_value());
    EXPECT_FALSE((*fork)->tail_copy.has_value());
    EXPECT_THAT(Table(manager, child), ElementsAre(0, 1));
  }
  EXPECT_EQ(manager.pool().ref_count(0), 4);
  EXPECT_EQ(manager.num_free_blocks(), 5);
  EXPECT_TRUE(manager.CheckInvariants().ok()) << manager.CheckInvariants();
}

TEST(KvCacheManagerTest, ForkWithoutAFreeTailBlockChangesNothing) {
  KvCacheManager manager = MakeManager(3, 4);
  StartAndPrefill(manager, 1, Range(0, 10));  // all 3 blocks
  const absl::StatusOr<std::optional<ForkResult>> fork = manager.ForkSequence(1, 2);
  ASSERT_TRUE(fork.ok()) << fork.status();
  EXPECT_FALSE(fork->has_value());
  EXPECT_EQ(manager.num_sequences(), 1);
  EXPECT_EQ(manager.pool().ref_count(0), 1);
  EXPECT_TRUE(manager.CheckInvariants().ok()) << manager.CheckInvariants();
}

TEST(KvCacheManagerTest, ErrorsNameTheProblem) {
  KvCacheManager manager = MakeManager(7, 4);
  StartAndPrefill(manager, 1, Range(0, 10));
  const PrefixHit miss = manager.FindCachedPrefix(Range(500, 5));
  EXPECT_EQ(manager.StartSequence(1, miss, 5).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(manager.StartSequence(2, miss, 29).status().code(),
            absl::StatusCode::kResourceExhausted);  // 8 blocks > 7, ever
  EXPECT_EQ(manager.StartSequence(2, miss, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager.AllocateSlots(9, 4).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(manager.AllocateSlots(1, 29).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(manager.FreeSequence(9).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(manager.ForkSequence(9, 10).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(manager.ForkSequence(1, 1).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(manager.CommitComputedTokens(1, Range(0, 10), 9).code(),
            absl::StatusCode::kFailedPrecondition);  // backwards
  EXPECT_EQ(manager.CommitComputedTokens(1, Range(0, 13), 13).code(),
            absl::StatusCode::kFailedPrecondition);  // past the 12 reserved slots
  EXPECT_EQ(manager.CommitComputedTokens(1, Range(0, 10), 11).code(),
            absl::StatusCode::kInvalidArgument);  // too few token ids
  EXPECT_EQ(KvCacheManager::Create({.num_blocks = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvCacheManager::Create({.num_blocks = 4, .block_size = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(manager.CheckInvariants().ok()) << manager.CheckInvariants();
}

TEST(KvCacheManagerTest, StaleHitIsRejected) {
  KvCacheManager manager = MakeManager(3, 4);
  StartAndPrefill(manager, 1, Range(0, 9));  // 0 1 cached, 2 partial
  ASSERT_TRUE(manager.FreeSequence(1).ok());
  const PrefixHit hit = manager.FindCachedPrefix(Range(0, 9));
  ASSERT_THAT(hit.block_ids, ElementsAre(0, 1));
  StartAndPrefill(manager, 2, Range(100, 12));  // evicts 0 and 1
  EXPECT_EQ(manager.StartSequence(3, hit, 9).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(KvCacheManagerTest, CachingOffSharesNothingButForksStillWork) {
  KvCacheManager manager = MakeManager(7, 4, /*caching=*/false);
  StartAndPrefill(manager, 1, Range(0, 10));
  EXPECT_FALSE(manager.pool().hash_of(0).has_value());
  const PrefixHit hit = manager.FindCachedPrefix(Range(0, 10));
  EXPECT_THAT(hit.block_ids, IsEmpty());
  StartAndPrefill(manager, 2, Range(0, 10));
  EXPECT_THAT(Table(manager, 2), ElementsAre(3, 4, 5));
  const absl::StatusOr<std::optional<ForkResult>> fork = manager.ForkSequence(1, 3);
  ASSERT_TRUE(fork.ok() && fork->has_value());
  EXPECT_THAT(Table(manager, 3), ElementsAre(0, 1, 6));
  ASSERT_TRUE(manager.FreeSequence(1).ok());
  ASSERT_TRUE(manager.FreeSequence(2).ok());
  ASSERT_TRUE(manager.FreeSequence(3).ok());
  EXPECT_EQ(manager.num_free_blocks(), 7);
  EXPECT_EQ(manager.pool().num_cached_blocks(), 0);
  EXPECT_TRUE(manager.CheckInvariants().ok()) << manager.CheckInvariants();
}

TEST(KvCacheManagerTest, DuplicateComputationLeavesTheSecondBlockPrivate) {
  KvCacheManager manager = MakeManager(7, 4);
  // Both start before either commits, so neither hits the other.
  const PrefixHit hit = manager.FindCachedPrefix(Range(0, 5));
  ASSERT_TRUE(manager.StartSequence(1, hit, 5).ok());
  ASSERT_TRUE(manager.StartSequence(2, hit, 5).ok());
  ASSERT_TRUE(manager.CommitComputedTokens(1, Range(0, 5), 5).ok());
  ASSERT_TRUE(manager.CommitComputedTokens(2, Range(0, 5), 5).ok());
  EXPECT_THAT(Table(manager, 2), ElementsAre(2, 3));
  EXPECT_TRUE(manager.pool().hash_of(0).has_value());
  EXPECT_FALSE(manager.pool().hash_of(2).has_value());
  ASSERT_TRUE(manager.FreeSequence(2).ok());
  EXPECT_THAT(manager.pool().FreeListInEvictionOrder(), ElementsAre(2, 3, 4, 5, 6));
  EXPECT_TRUE(manager.CheckInvariants().ok()) << manager.CheckInvariants();
}

}  // namespace
}  // namespace ernie::kv
