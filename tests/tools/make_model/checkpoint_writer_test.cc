#include "tools/make_model/checkpoint_writer.h"

#include <gtest/gtest.h>

namespace ernie::make_model {
namespace {

std::vector<TensorEntry> ThreeTensors() {
  return {{.name = "a", .shape = {10}}, {.name = "b", .shape = {20}}, {.name = "c", .shape = {5}}};
}

TEST(PlanShardsTest, EverythingFitsInOneUnshardedFile) {
  const auto plan = PlanShards(ThreeTensors(), WeightDtype::kBFloat16, 70);  // 70 bytes total
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ((*plan)[0].file_name, "model.safetensors");
  EXPECT_EQ((*plan)[0].data_bytes, 70u);
  EXPECT_EQ((*plan)[0].tensor_indices, (std::vector<size_t>{0, 1, 2}));
}

TEST(PlanShardsTest, ClosesAShardBeforeItWouldOverflow) {
  // bf16: a=20, b=40, c=10 bytes. Limit 50: [a] (a+b=60 > 50), [b, c].
  const auto plan = PlanShards(ThreeTensors(), WeightDtype::kBFloat16, 50);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[0].file_name, "model-00001-of-00002.safetensors");
  EXPECT_EQ((*plan)[1].file_name, "model-00002-of-00002.safetensors");
  EXPECT_EQ((*plan)[0].tensor_indices, (std::vector<size_t>{0}));
  EXPECT_EQ((*plan)[1].tensor_indices, (std::vector<size_t>{1, 2}));
  EXPECT_EQ((*plan)[1].data_bytes, 50u);
}

TEST(PlanShardsTest, ATensorLargerThanTheLimitGetsItsOwnShard) {
  const auto plan = PlanShards(ThreeTensors(), WeightDtype::kFloat32, 30);  // a=40 b=80 c=20
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 3u);
  EXPECT_EQ((*plan)[2].file_name, "model-00003-of-00003.safetensors");
  EXPECT_EQ((*plan)[1].data_bytes, 80u);
}

TEST(PlanShardsTest, RejectsAZeroLimit) {
  EXPECT_EQ(PlanShards(ThreeTensors(), WeightDtype::kBFloat16, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ernie::make_model
