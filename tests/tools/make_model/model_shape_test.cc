#include "tools/make_model/model_shape.h"

#include <gtest/gtest.h>

#include <set>

namespace ernie::make_model {
namespace {

TEST(ModelShapeTest, Ernie03BHasTheReleasedParameterCountAndTensorCount) {
  const auto shape = ShapeByName("0.3b");
  ASSERT_TRUE(shape.ok()) << shape.status();
  const std::vector<TensorEntry> tensors = DenseTensorList(*shape);
  EXPECT_EQ(CountParameters(tensors), 360'748'032);
  // embed_tokens + 18 layers x 9 tensors + final norm; tied, so no lm_head.
  EXPECT_EQ(tensors.size(), 1u + 18u * 9u + 1u);
  for (const TensorEntry& t : tensors) EXPECT_NE(t.name, "lm_head.weight");
}

TEST(ModelShapeTest, Ernie03BTensorNamesAndShapesMatchHuggingFace) {
  const std::vector<TensorEntry> tensors = DenseTensorList(*ShapeByName("0.3b"));
  ASSERT_EQ(tensors.size(), 164u);
  auto expect = [&](size_t i, const std::string& name, std::vector<int64_t> shape) {
    EXPECT_EQ(tensors[i].name, name);
    EXPECT_EQ(tensors[i].shape, shape) << name;
  };
  expect(0, "model.embed_tokens.weight", {103424, 1024});
  expect(1, "model.layers.0.input_layernorm.weight", {1024});
  expect(2, "model.layers.0.self_attn.q_proj.weight", {2048, 1024});
  expect(3, "model.layers.0.self_attn.k_proj.weight", {256, 1024});
  expect(4, "model.layers.0.self_attn.v_proj.weight", {256, 1024});
  expect(5, "model.layers.0.self_attn.o_proj.weight", {1024, 2048});
  expect(6, "model.layers.0.post_attention_layernorm.weight", {1024});
  expect(7, "model.layers.0.mlp.gate_proj.weight", {3072, 1024});
  expect(8, "model.layers.0.mlp.up_proj.weight", {3072, 1024});
  expect(9, "model.layers.0.mlp.down_proj.weight", {1024, 3072});
  expect(154, "model.layers.17.input_layernorm.weight", {1024});
  expect(163, "model.norm.weight", {1024});
  std::set<std::string> names;
  for (const TensorEntry& t : tensors) EXPECT_TRUE(names.insert(t.name).second) << t.name;
  // Projections know their input width (it sets their spread).
  EXPECT_EQ(tensors[5].fan_in, 2048);
  EXPECT_EQ(tensors[9].fan_in, 3072);
  EXPECT_EQ(tensors[0].kind, WeightKind::kEmbedding);
  EXPECT_EQ(tensors[1].kind, WeightKind::kNorm);
}

TEST(ModelShapeTest, DemoKeepsTheRealVocabulary) {
  const auto demo = ShapeByName("demo");
  ASSERT_TRUE(demo.ok());
  EXPECT_EQ(demo->vocab_size, 103424);
  EXPECT_EQ(demo->hidden_size, 256);
  EXPECT_EQ(demo->num_hidden_layers, 4);
  EXPECT_EQ(demo->num_attention_heads, 4);
  EXPECT_EQ(demo->num_key_value_heads, 2);
  EXPECT_EQ(demo->head_dim, 64);
  EXPECT_EQ(demo->intermediate_size, 768);
  EXPECT_TRUE(demo->tie_word_embeddings);
  const auto tensors = DenseTensorList(*demo);
  EXPECT_EQ(tensors.size(), 1u + 4u * 9u + 1u);
  // 103424*256 + 4*(2*256 + 256*256 + 2*128*256 + 256*256 + 3*768*256) + 256
  EXPECT_EQ(CountParameters(tensors), 29'624'576);
}

TEST(ModelShapeTest, UntiedOrBiasedShapesAddTheirTensors) {
  DenseShape shape = *ShapeByName("demo");
  shape.tie_word_embeddings = false;
  shape.use_bias = true;
  const auto tensors = DenseTensorList(shape);
  EXPECT_EQ(tensors.back().name, "lm_head.weight");
  EXPECT_EQ(tensors[3].name, "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(tensors[3].shape, std::vector<int64_t>{256});
}

TEST(ModelShapeTest, The21bA3bShapeHasTheReleasedCounts) {
  const auto moe = ShapeByName("21b-a3b");
  ASSERT_TRUE(moe.ok());
  const auto tensors = DenseTensorList(*moe);
  // ARCHITECTURE.md: about 21.8B parameters, 3.35B active per token. Exactly:
  // embeddings 103424 x 2560 = 264,765,440; attention + norms 28 x 15,733,760;
  // layer 0's MLP 3 x 2560 x 12288 = 94,371,840; 27 MoE layers of router
  // 163,840 + bias 64 + 64 experts x 11,796,480 + shared 23,592,960; final norm 2560.
  const int64_t total = CountParameters(tensors);
  EXPECT_EQ(total, 264765440LL + 28LL * 15733760 + 94371840LL + 27LL * (163840 + 64 + 64LL * 11796480 + 23592960) + 2560);
  EXPECT_EQ(total, 21825437888LL);
  const int64_t per_expert = 3 * 2560 * 1536;
  const int64_t active = total - 27 * (64 - 6) * per_expert;
  EXPECT_EQ(active, 3352150208LL);
  EXPECT_FALSE(moe->IsMoeLayer(0));
  EXPECT_TRUE(moe->IsMoeLayer(1));
  EXPECT_TRUE(moe->IsMoeLayer(27));
  auto has = [&](const std::string& name) {
    return std::any_of(tensors.begin(), tensors.end(), [&](const TensorEntry& t) { return t.name == name; });
  };
  EXPECT_TRUE(has("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_TRUE(has("model.layers.1.mlp.gate.weight"));
  EXPECT_TRUE(has("model.layers.1.mlp.moe_statics.e_score_correction_bias"));
  EXPECT_TRUE(has("model.layers.27.mlp.experts.63.down_proj.weight"));
  EXPECT_TRUE(has("model.layers.5.mlp.shared_experts.up_proj.weight"));
  EXPECT_FALSE(has("model.layers.1.mlp.gate_proj.weight"));
  EXPECT_FALSE(has("lm_head.weight"));
}

TEST(ModelShapeTest, UnknownShapesNamed) {
  const auto bad = ShapeByName("7b");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'7b'"), std::string::npos);
}

}  // namespace
}  // namespace ernie::make_model
