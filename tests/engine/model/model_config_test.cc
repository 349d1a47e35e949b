#include "engine/model/model_config.h"

#include <gtest/gtest.h>

#include <string>

namespace ernie {
namespace {

// ERNIE-4.5-0.3B-PT's shape, spelled as Baidu's release spells config.json.
constexpr char kBaidu03b[] = R"({
  "architectures": ["Ernie4_5_ForCausalLM"], "model_type": "ernie4_5",
  "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 18,
  "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 128,
  "vocab_size": 103424, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
  "rope_theta": 500000, "tie_word_embeddings": true, "use_bias": false,
  "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
  "hidden_act": "silu"})";

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

TEST(ModelConfigTest, ParsesBaiduSpelling) {
  auto c = ParseModelConfig(kBaidu03b, "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture_name, "Ernie4_5_ForCausalLM");
  EXPECT_EQ(c->hidden_size, 1024);
  EXPECT_EQ(c->q_size(), 2048);  // heads x head_dim is not hidden
  EXPECT_EQ(c->kv_size(), 256);
  EXPECT_DOUBLE_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->dtype, DType::kBF16);
  EXPECT_EQ(c->eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(c->ParameterCount(), 360748032);
}

TEST(ModelConfigTest, ParsesTransformers5Spelling) {
  std::string text = Replace(kBaidu03b, R"("rope_theta": 500000,)", R"("rope_parameters": {"rope_theta": 250000.0, "rope_type": "default"},)");
  text = Replace(text, R"("torch_dtype": "bfloat16")", R"("dtype": "float32")");
  text = Replace(text, "Ernie4_5_ForCausalLM", "Ernie4_5ForCausalLM");
  auto c = ParseModelConfig(text, "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->rope_theta, 250000.0);
  EXPECT_EQ(c->dtype, DType::kF32);
}

TEST(ModelConfigTest, HeadDimFallsBackToHiddenOverHeads) {
  auto c = ParseModelConfig(Replace(kBaidu03b, R"("head_dim": 128,)", ""), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 64);
}

TEST(ModelConfigTest, EosMayBeAList) {
  auto c = ParseModelConfig(Replace(kBaidu03b, R"("eos_token_id": 2)", R"("eos_token_id": [2, 100272])"), "c");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{2, 100272}));
}

// ERNIE-4.5-21B-A3B-PT's MoE keys as Baidu's config.json spells them.
constexpr char kBaidu21bA3b[] = R"({
  "architectures": ["Ernie4_5_MoeForCausalLM"], "model_type": "ernie4_5_moe",
  "hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 28,
  "num_attention_heads": 20, "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 103424,
  "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000,
  "tie_word_embeddings": true, "use_bias": false, "torch_dtype": "bfloat16",
  "moe_num_experts": 64, "moe_k": 6, "moe_num_shared_experts": 2, "moe_intermediate_size": 1536,
  "moe_layer_start_index": 1, "moe_layer_end_index": -1, "moe_layer_interval": 1, "moe_norm_min": 1e-12})";

TEST(ModelConfigTest, ParsesTheMoeRelease) {
  auto c = ParseModelConfig(kBaidu21bA3b, "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, Architecture::kErnie45Moe);
  EXPECT_EQ(c->moe.layer_end, 27);  // -1: the last layer
  EXPECT_FALSE(c->IsMoeLayer(0));
  EXPECT_TRUE(c->IsMoeLayer(1));
  EXPECT_TRUE(c->IsMoeLayer(27));
  // About 21.8B parameters, 3.35B active per token (ARCHITECTURE.md).
  EXPECT_EQ(c->ParameterCount(), 21825437888LL);
  EXPECT_EQ(c->ActiveParameterCount(), 3352150208LL);
  auto bad = ParseModelConfig(Replace(kBaidu21bA3b, R"("moe_k": 6)", R"("moe_k": 65)"), "c");
  EXPECT_NE(std::string(bad.status().message()).find("'moe_k' 65 is more than moe_num_experts 64"), std::string::npos);
  // The routing divides by at least moe_norm_min in float32, where 1e-50 is 0.
  auto tiny = ParseModelConfig(Replace(kBaidu21bA3b, R"("moe_norm_min": 1e-12)", R"("moe_norm_min": 1e-50)"), "c");
  EXPECT_NE(std::string(tiny.status().message()).find("'moe_norm_min' 1e-50 is outside float32's range"),
            std::string::npos)
      << tiny.status();
  bad = ParseModelConfig(Replace(kBaidu21bA3b, R"("moe_num_experts": 64,)", ""), "c");
  EXPECT_NE(std::string(bad.status().message()).find("'moe_num_experts' is missing"), std::string::npos);
}

struct BadCase {
  std::string from, to, expect;
};

TEST(ModelConfigTest, ErrorsNameTheKey) {
  const BadCase cases[] = {
      {R"("Ernie4_5_ForCausalLM")", R"("LlamaForCausalLM")", "'LlamaForCausalLM' is not supported"},
      {R"("hidden_size": 1024,)", "", "'hidden_size' is missing"},
      {R"("num_hidden_layers": 18)", R"("num_hidden_layers": "18")", "'num_hidden_layers' must be an integer"},
      {R"("num_key_value_heads": 2)", R"("num_key_value_heads": 3)", "does not divide"},
      {R"("head_dim": 128)", R"("head_dim": 127)", "must be even"},
      {R"("torch_dtype": "bfloat16")", R"("torch_dtype": "int8")", "'int8' is not float32"},
      {R"("hidden_act": "silu")", R"("hidden_act": "gelu")", "'hidden_act'"},
      {R"("vocab_size": 103424)", R"("vocab_size": -5)", "must be positive"},
      {R"("rope_theta": 500000)", R"("rope_theta": 0)", "'rope_theta' must be positive"},
      // Positive, but 0 and infinity in the float32 the norms use (a fuzzer's find).
      {R"("rms_norm_eps": 1e-05)", R"("rms_norm_eps": 1e-50)", "'rms_norm_eps' 1e-50 is outside float32's range"},
      {R"("rms_norm_eps": 1e-05)", R"("rms_norm_eps": 1e+50)", "'rms_norm_eps' 1e+50 is outside float32's range"},
  };
  for (const auto& bad : cases) {
    auto c = ParseModelConfig(Replace(kBaidu03b, bad.from, bad.to), "m/config.json");
    ASSERT_FALSE(c.ok()) << bad.to;
    EXPECT_NE(std::string(c.status().message()).find(bad.expect), std::string::npos) << c.status();
    EXPECT_NE(std::string(c.status().message()).find("m/config.json"), std::string::npos);
  }
  EXPECT_FALSE(ParseModelConfig("{oops", "c").ok());
  EXPECT_FALSE(ParseModelConfig("[]", "c").ok());
}

}  // namespace
}  // namespace ernie
