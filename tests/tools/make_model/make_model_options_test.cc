#include "tools/make_model/make_model_options.h"

#include <gtest/gtest.h>

namespace ernie::make_model {
namespace {

absl::StatusOr<MakeModelOptions> Parse(std::vector<std::string> args) {
  return ParseMakeModelArgs(args, "/default/corpus");
}

TEST(MakeModelOptionsTest, ParsesEveryFlagInBothSpellings) {
  const auto options = Parse({"out", "--shape", "0.3b", "--seed=42", "--max-shard-bytes", "1000",
                              "--dtype=float16", "--corpus", "/c"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->output_dir, "out");
  EXPECT_EQ(options->shape.name, "0.3b");
  EXPECT_EQ(options->seed, 42u);
  EXPECT_EQ(options->max_shard_bytes, 1000u);
  EXPECT_EQ(options->dtype, WeightDtype::kFloat16);
  EXPECT_EQ(options->corpus_dir, "/c");
}

TEST(MakeModelOptionsTest, NumLayersKeepsTheFirstLayersOfTheShape) {
  const auto options = Parse({"out", "--shape", "21b-a3b", "--seed", "1", "--num-layers", "3"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->shape.num_hidden_layers, 3);
  EXPECT_EQ(options->shape.hidden_size, 2560);  // every layer keeps its shape
  EXPECT_TRUE(options->shape.IsMoeLayer(2));
  EXPECT_EQ(Parse({"out", "--shape", "demo", "--seed", "1"})->num_layers, 0);
  const auto too_many = Parse({"out", "--shape", "demo", "--seed", "1", "--num-layers", "5"});
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("--num-layers 5"), std::string::npos) << too_many.status();
  const auto zero = Parse({"out", "--shape", "demo", "--seed", "1", "--num-layers=0"});
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("positive"), std::string::npos) << zero.status();
}

TEST(MakeModelOptionsTest, DefaultsMatchHuggingFace) {
  const auto options = Parse({"--shape", "demo", "--seed", "0", "out"});
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->max_shard_bytes, 5'000'000'000u);
  EXPECT_EQ(options->dtype, WeightDtype::kBFloat16);
  EXPECT_EQ(options->corpus_dir, "/default/corpus");
}

TEST(MakeModelOptionsTest, ConfigOnlyIsAFlagWithoutValue) {
  const auto options = Parse({"--shape", "21b-a3b", "--config-only", "--seed", "0", "out"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->config_only);
  EXPECT_EQ(options->output_dir, "out");
  EXPECT_FALSE(Parse({"--shape", "demo", "--seed", "0", "out"})->config_only);
  const auto with_value = Parse({"--shape", "demo", "--seed", "0", "--config-only=1", "out"});
  ASSERT_FALSE(with_value.ok());
  EXPECT_NE(with_value.status().message().find("--config-only"), std::string::npos);
}

TEST(MakeModelOptionsTest, AwqGroupSizeNeedsConfigOnlyAndAnAwqGroupSize) {
  const auto options = Parse({"out", "--shape", "21b-a3b", "--seed", "0", "--config-only", "--awq-group-size", "128"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->awq_group_size, 128);
  EXPECT_EQ(Parse({"out", "--shape", "demo", "--seed", "0"})->awq_group_size, 0);
  const auto no_config_only = Parse({"out", "--shape", "demo", "--seed", "0", "--awq-group-size=64"});
  ASSERT_FALSE(no_config_only.ok());
  EXPECT_NE(no_config_only.status().message().find("--awq-group-size needs --config-only"), std::string::npos)
      << no_config_only.status();
  const auto odd = Parse({"out", "--shape", "demo", "--seed", "0", "--config-only", "--awq-group-size", "48"});
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("--awq-group-size must be 32, 64 or 128, got 48"), std::string::npos)
      << odd.status();
}

TEST(MakeModelOptionsTest, ErrorsNameWhatIsWrong) {
  auto message = [](std::vector<std::string> args) {
    return std::string(Parse(std::move(args)).status().message());
  };
  EXPECT_NE(message({"--shape", "demo", "--seed", "1"}).find("DIR"), std::string::npos);
  EXPECT_NE(message({"out", "--seed", "1"}).find("--shape"), std::string::npos);
  EXPECT_NE(message({"out", "--shape", "demo"}).find("--seed"), std::string::npos);
  EXPECT_NE(message({"out", "--shape", "demo", "--seed", "x"}).find("'x'"), std::string::npos);
  EXPECT_NE(message({"out", "--shape", "demo", "--seed", "-3"}).find("--seed"), std::string::npos);
  EXPECT_NE(message({"out", "--shape", "demo", "--seed", "1", "--frob", "2"}).find("--frob"),
            std::string::npos);
  EXPECT_NE(message({"out", "--shape", "demo", "--seed", "1", "--dtype", "int8"}).find("int8"),
            std::string::npos);
  EXPECT_NE(message({"out", "--shape", "demo", "--seed", "1", "--max-shard-bytes", "0"}).find("positive"),
            std::string::npos);
  EXPECT_NE(message({"out", "--shape", "demo", "--seed"}).find("needs a value"), std::string::npos);
  EXPECT_NE(message({"out", "other", "--shape", "demo", "--seed", "1"}).find("'other'"), std::string::npos);
  EXPECT_TRUE(Parse({"out", "--shape", "21b-a3b", "--seed", "1"}).ok());
}

}  // namespace
}  // namespace ernie::make_model
