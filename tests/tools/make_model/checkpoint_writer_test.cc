#include "tools/make_model/checkpoint_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"

namespace ernie::make_model {
namespace {

namespace fs = std::filesystem;

// A fresh empty directory under the test's temporary directory.
std::string FreshDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string FileBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

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

// Twelve tensors of 1 - 12 KB in bf16, so a 16 KB limit makes several shards.
std::vector<TensorEntry> ManyTensors() {
  std::vector<TensorEntry> tensors;
  for (int i = 1; i <= 12; ++i) tensors.push_back({.name = absl::StrCat("t", i), .shape = {i, 512}});
  return tensors;
}

TEST(WriteCheckpointTest, ShardsWrittenInParallelAreTheBytesOneThreadWrites) {
  const CheckpointOptions one{.seed = 5, .max_shard_bytes = 16 * 1024, .threads = 1};
  CheckpointOptions four = one;
  four.threads = 4;
  const std::string serial = FreshDir("checkpoint_serial"), parallel = FreshDir("checkpoint_parallel");
  const auto plan = WriteCheckpoint(serial, ManyTensors(), one);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GT(plan->size(), 4u) << "enough shards for every thread";
  ASSERT_TRUE(WriteCheckpoint(parallel, ManyTensors(), four).ok());
  for (const ShardPlan& shard : *plan) {
    SCOPED_TRACE(shard.file_name);
    const std::string bytes = FileBytes(fs::path(serial) / shard.file_name);
    EXPECT_GT(bytes.size(), shard.data_bytes);
    EXPECT_EQ(FileBytes(fs::path(parallel) / shard.file_name), bytes);
  }
  EXPECT_EQ(FileBytes(fs::path(parallel) / "model.safetensors.index.json"),
            FileBytes(fs::path(serial) / "model.safetensors.index.json"));
}

TEST(WriteCheckpointTest, AShardThatCannotBeWrittenIsTheErrorFromAnyThread) {
  const std::string missing = (fs::path(::testing::TempDir()) / "no_such_dir" / "deeper").string();
  const auto plan = WriteCheckpoint(missing, ManyTensors(), {.max_shard_bytes = 16 * 1024, .threads = 3});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("model-00001-of-"), std::string::npos) << plan.status();
}

TEST(WriteCheckpointTest, RejectsANegativeThreadCount) {
  EXPECT_EQ(WriteCheckpoint(FreshDir("checkpoint_bad"), ManyTensors(), {.threads = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ernie::make_model
