#include "engine/model/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/model/ernie4_5_weights.h"
#include "tests/engine/model/safetensors_bytes.h"

namespace ernie {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ernie_ckpt_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  void WriteTensorFile(const std::string& name, const std::string& tensor, int floats) {
    const std::string header = "{\"" + tensor + "\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(floats) +
                               "],\"data_offsets\":[0," + std::to_string(floats * 4) + "]}}";
    auto bytes = testing::SafetensorsBytes(header, std::vector<uint8_t>(static_cast<size_t>(floats) * 4, 0));
    std::ofstream(dir_ / name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }

  fs::path dir_;
};

TEST_F(CheckpointTest, OpensSingleFile) {
  WriteTensorFile("model.safetensors", "w", 3);
  auto ckpt = Checkpoint::Open(dir_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_TRUE((*ckpt)->Has("w"));
  EXPECT_EQ((*ckpt)->total_bytes(), 12);
  EXPECT_TRUE((*ckpt)->FindWithShape("w", {3}).ok());
  auto wrong = (*ckpt)->FindWithShape("w", {4});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(std::string(wrong.status().message()).find("has shape [3], expected [4]"), std::string::npos);
  auto missing = (*ckpt)->Find("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CheckpointTest, OpensShardsThroughIndex) {
  WriteTensorFile("model-00001-of-00002.safetensors", "a", 2);
  WriteTensorFile("model-00002-of-00002.safetensors", "b", 5);
  Write("model.safetensors.index.json",
        R"({"metadata":{"total_size":28},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})");
  auto ckpt = Checkpoint::Open(dir_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->tensors().size(), 2u);
  EXPECT_EQ((*ckpt)->total_bytes(), 28);
}

TEST_F(CheckpointTest, IndexErrorsNameTheProblem) {
  WriteTensorFile("s1.safetensors", "a", 2);
  Write("model.safetensors.index.json", R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors"}})");
  auto r = Checkpoint::Open(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("'b' is listed in s1.safetensors but no shard holds it"),
            std::string::npos);

  Write("model.safetensors.index.json", R"({"weight_map":{"a":"missing.safetensors"}})");
  r = Checkpoint::Open(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("missing.safetensors"), std::string::npos);

  Write("model.safetensors.index.json", R"({"weight_map":{"a":"../etc/passwd"}})");
  EXPECT_NE(std::string(Checkpoint::Open(dir_).status().message()).find("bad shard name"), std::string::npos);

  Write("model.safetensors.index.json", "not json");
  EXPECT_NE(std::string(Checkpoint::Open(dir_).status().message()).find("not a JSON object"), std::string::npos);
}

TEST_F(CheckpointTest, DuplicateTensorAcrossShards) {
  WriteTensorFile("s1.safetensors", "a", 2);
  WriteTensorFile("s2.safetensors", "a", 2);
  Write("model.safetensors.index.json", R"({"weight_map":{"a":"s1.safetensors","x":"s2.safetensors"}})");
  auto r = Checkpoint::Open(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("is in both"), std::string::npos);
}

TEST_F(CheckpointTest, NoWeightsAtAll) {
  auto r = Checkpoint::Open(dir_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Checkpoint::Open((dir_ / "absent").string()).status().code(), absl::StatusCode::kNotFound);
}

TEST(LoadModelTest, BindsEveryReferenceCheckpoint) {
  for (const char* name : {"gqa1_f32_tied_v97", "gqa2_bf16_untied_v1002", "gqa3_f16_sharded_v211",
                           "gqa4_bf16_bias_untied_v515", "gqa8_f32_bias_v333"}) {
    auto m = LoadModel(std::string(ERNIE_TEST_DATA_DIR) + "/dense_reference/" + name);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    EXPECT_EQ(static_cast<int64_t>((*m)->weights.layers.size()), (*m)->config.num_layers);
    EXPECT_EQ((*m)->config.use_bias, (*m)->weights.layers[0].q_proj.bias != nullptr);
  }
}

TEST_F(CheckpointTest, MissingAndMisshapenTensorsAreNamed) {
  const std::string ref = std::string(ERNIE_TEST_DATA_DIR) + "/dense_reference/gqa1_f32_tied_v97";
  fs::copy_file(ref + "/config.json", dir_ / "config.json");
  WriteTensorFile("model.safetensors", "model.embed_tokens.weight", 5);
  auto m = LoadModel(dir_);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(std::string(m.status().message()).find("'model.embed_tokens.weight' has shape [5], expected [97, 64]"),
            std::string::npos);
}

}  // namespace
}  // namespace ernie
