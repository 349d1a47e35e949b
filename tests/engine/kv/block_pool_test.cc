#include "engine/kv/block_pool.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ernie::kv {
namespace {

using ::testing::ElementsAre;

BlockHash Hash(uint64_t n) { return BlockHash{.lo = n, .hi = ~n}; }

BlockPool MakePool(int32_t num_blocks) {
  absl::StatusOr<BlockPool> pool = BlockPool::Create(num_blocks);
  EXPECT_TRUE(pool.ok()) << pool.status();
  return *std::move(pool);
}

TEST(BlockPoolTest, FreshPoolHandsOutAscendingIds) {
  BlockPool pool = MakePool(7);
  EXPECT_THAT(pool.FreeListInEvictionOrder(), ElementsAre(0, 1, 2, 3, 4, 5, 6));
  const std::optional<std::vector<int32_t>> blocks = pool.Allocate(3);
  ASSERT_TRUE(blocks.has_value());
  EXPECT_THAT(*blocks, ElementsAre(0, 1, 2));
  EXPECT_EQ(pool.num_free_blocks(), 4);
  EXPECT_EQ(pool.ref_count(0), 1);
  EXPECT_EQ(pool.ref_count(3), 0);
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

TEST(BlockPoolTest, AllocationThatCannotFitChangesNothing) {
  BlockPool pool = MakePool(7);
  ASSERT_TRUE(pool.Allocate(3).has_value());
  EXPECT_FALSE(pool.Allocate(5).has_value());
  EXPECT_FALSE(pool.Allocate(-1).has_value());
  EXPECT_EQ(pool.num_free_blocks(), 4);
  EXPECT_THAT(pool.FreeListInEvictionOrder(), ElementsAre(3, 4, 5, 6));
  EXPECT_TRUE(pool.Allocate(0).has_value());
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

TEST(BlockPoolTest, UncachedBlocksAreReusedFirstCachedOnesInLruOrder) {
  BlockPool pool = MakePool(7);
  ASSERT_TRUE(pool.Allocate(3).has_value());  // 0 1 2
  ASSERT_TRUE(*pool.CacheBlock(0, Hash(10)));
  ASSERT_TRUE(*pool.CacheBlock(1, Hash(11)));
  // Released tail first, as a sequence is: 2 (uncached) goes to the head,
  // then 1 and 0 (cached) to the tail, so the prefix's tail is evicted first.
  ASSERT_TRUE(pool.Free({2, 1, 0}).ok());
  EXPECT_THAT(pool.FreeListInEvictionOrder(), ElementsAre(2, 3, 4, 5, 6, 1, 0));
  EXPECT_EQ(pool.num_cached_blocks(), 2);

  const std::optional<std::vector<int32_t>> blocks = pool.Allocate(6);
  ASSERT_TRUE(blocks.has_value());
  EXPECT_THAT(*blocks, ElementsAre(2, 3, 4, 5, 6, 1));
  EXPECT_EQ(pool.num_evicted_blocks(), 1);
  EXPECT_FALSE(pool.FindCached(Hash(11)).has_value());  // evicted with block 1
  EXPECT_FALSE(pool.hash_of(1).has_value());
  EXPECT_EQ(pool.FindCached(Hash(10)), 0);  // still cached-free
  EXPECT_THAT(pool.FreeListInEvictionOrder(), ElementsAre(0));
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

TEST(BlockPoolTest, TouchRevivesACachedFreeBlockFromTheMiddle) {
  BlockPool pool = MakePool(7);
  ASSERT_TRUE(pool.Allocate(7).has_value());
  ASSERT_TRUE(*pool.CacheBlock(4, Hash(4)));
  ASSERT_TRUE(*pool.CacheBlock(5, Hash(5)));
  ASSERT_TRUE(*pool.CacheBlock(6, Hash(6)));
  ASSERT_TRUE(pool.Free({4, 5, 6}).ok());
  EXPECT_THAT(pool.FreeListInEvictionOrder(), ElementsAre(4, 5, 6));

  ASSERT_TRUE(pool.Touch({5}).ok());
  EXPECT_EQ(pool.ref_count(5), 1);
  EXPECT_THAT(pool.FreeListInEvictionOrder(), ElementsAre(4, 6));
  EXPECT_EQ(pool.hash_of(5), Hash(5));  // a hit keeps its hash
  // A second reference to an owned block (sharing) leaves the list alone.
  ASSERT_TRUE(pool.Touch({5, 5}).ok());
  EXPECT_EQ(pool.ref_count(5), 3);
  EXPECT_TRUE(pool.CheckInvariants().ok());

  ASSERT_TRUE(pool.Free({5}).ok());
  ASSERT_TRUE(pool.Free({5}).ok());
  EXPECT_THAT(pool.FreeListInEvictionOrder(), ElementsAre(4, 6));  // still one owner
  ASSERT_TRUE(pool.Free({5}).ok());
  EXPECT_THAT(pool.FreeListInEvictionOrder(), ElementsAre(4, 6, 5));  // most recent last
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

TEST(BlockPoolTest, MisuseIsAnErrorWithoutSideEffects) {
  BlockPool pool = MakePool(7);
  ASSERT_TRUE(pool.Allocate(2).has_value());  // 0 1
  const std::vector<int32_t> free_before = pool.FreeListInEvictionOrder();

  EXPECT_EQ(pool.Touch({0, 3}).code(), absl::StatusCode::kFailedPrecondition);  // 3 holds nothing
  EXPECT_EQ(pool.Touch({0, 7}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.Free({1, 1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.Free({0, 2}).code(), absl::StatusCode::kFailedPrecondition);  // 2 not owned
  EXPECT_EQ(pool.Free({-1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.ref_count(0), 1);
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(pool.FreeListInEvictionOrder(), free_before);

  EXPECT_EQ(pool.CacheBlock(3, Hash(1)).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(*pool.CacheBlock(0, Hash(1)));
  EXPECT_EQ(pool.CacheBlock(0, Hash(2)).status().code(), absl::StatusCode::kFailedPrecondition);
  // The same content computed twice: the second block stays uncached.
  EXPECT_FALSE(*pool.CacheBlock(1, Hash(1)));
  EXPECT_FALSE(pool.hash_of(1).has_value());
  EXPECT_EQ(pool.FindCached(Hash(1)), 0);
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

TEST(BlockPoolTest, CreateRejectsBadSizes) {
  EXPECT_EQ(BlockPool::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockPool::Create(-3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(BlockPool::Create(1).ok());
}

}  // namespace
}  // namespace ernie::kv
