#include "engine/kv/kv_cache_geometry.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace ernie::kv {
namespace {

// ERNIE-4.5-0.3B: 18 layers, 2 KV heads of 128, bf16.
constexpr KvCacheGeometry kErnie03B{
    .num_layers = 18, .num_kv_heads = 2, .head_dim = 128, .dtype_bytes = 2, .block_size = 16};

TEST(KvCacheGeometryTest, Ernie03BBytes) {
  ASSERT_TRUE(kErnie03B.Validate().ok());
  EXPECT_EQ(kErnie03B.BytesPerToken(), 18432);  // 18 * 2 * 128 * 2 (K, V) * 2 bytes
  EXPECT_EQ(kErnie03B.BytesPerBlock(), 294912);
}

TEST(KvCacheGeometryTest, PlansBlocksFromBudget) {
  const absl::StatusOr<KvCacheCapacity> capacity = PlanKvCacheCapacity(kErnie03B, int64_t{1} << 30);
  ASSERT_TRUE(capacity.ok()) << capacity.status();
  EXPECT_EQ(capacity->num_blocks, 3640);  // floor(1073741824 / 294912)
  EXPECT_EQ(capacity->num_tokens(), 58240);
  EXPECT_EQ(capacity->num_bytes(), int64_t{3640} * 294912);
  EXPECT_EQ(capacity->ToString(),
            "KV cache: 3640 blocks x 16 tokens = 58240 tokens, 1023.8 MiB (18432 bytes/token, "
            "294912 bytes/block)");
}

TEST(KvCacheGeometryTest, OddBlockSize) {
  KvCacheGeometry geometry = kErnie03B;
  geometry.block_size = 7;
  const absl::StatusOr<KvCacheCapacity> capacity = PlanKvCacheCapacity(geometry, 18432 * 7 * 3 + 5);
  ASSERT_TRUE(capacity.ok()) << capacity.status();
  EXPECT_EQ(capacity->num_blocks, 3);
  EXPECT_EQ(capacity->num_tokens(), 21);
}

TEST(KvCacheGeometryTest, BudgetBelowOneBlockIsResourceExhausted) {
  const absl::StatusOr<KvCacheCapacity> capacity = PlanKvCacheCapacity(kErnie03B, 294911);
  EXPECT_EQ(capacity.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(capacity.status().message().find("294912"), std::string_view::npos)
      << capacity.status();
  EXPECT_EQ(PlanKvCacheCapacity(kErnie03B, 0).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(KvCacheGeometryTest, BadInputsNameTheField) {
  EXPECT_EQ(PlanKvCacheCapacity(kErnie03B, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  KvCacheGeometry geometry = kErnie03B;
  geometry.head_dim = 0;
  const absl::Status status = geometry.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("head_dim"), std::string_view::npos) << status;
  geometry = kErnie03B;
  geometry.block_size = -16;
  EXPECT_NE(PlanKvCacheCapacity(geometry, 1 << 30).status().message().find("block_size"),
            std::string_view::npos);
}

TEST(KvCacheGeometryTest, BlockCountIsCappedAtInt32Ids) {
  const KvCacheGeometry tiny{
      .num_layers = 1, .num_kv_heads = 1, .head_dim = 1, .dtype_bytes = 1, .block_size = 1};
  const absl::StatusOr<KvCacheCapacity> capacity =
      PlanKvCacheCapacity(tiny, std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(capacity.ok()) << capacity.status();
  EXPECT_EQ(capacity->num_blocks, kMaxNumBlocks);
}

}  // namespace
}  // namespace ernie::kv
