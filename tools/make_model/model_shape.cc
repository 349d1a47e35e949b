#include "tools/make_model/model_shape.h"

#include "absl/strings/str_cat.h"

namespace ernie::make_model {
namespace {

// baidu/ERNIE-4.5-0.3B-PT's config.json.
DenseShape Ernie03B() {
  return DenseShape{.name = "0.3b",
                    .hidden_size = 1024,
                    .num_hidden_layers = 18,
                    .num_attention_heads = 16,
                    .num_key_value_heads = 2,
                    .head_dim = 128,
                    .intermediate_size = 3072,
                    .vocab_size = 103424};
}

// Small enough to run on a CPU in tests, with the real vocabulary so the
// real-layout tokenizer fits; GQA kept (2 query heads per KV head).
DenseShape Demo() {
  return DenseShape{.name = "demo",
                    .hidden_size = 256,
                    .num_hidden_layers = 4,
                    .num_attention_heads = 4,
                    .num_key_value_heads = 2,
                    .head_dim = 64,
                    .intermediate_size = 768,
                    .vocab_size = 103424};
}

void AddLinear(std::vector<TensorEntry>& out, const DenseShape& shape, const std::string& prefix,
               int64_t out_features, int64_t in_features) {
  out.push_back({.name = prefix + ".weight",
                 .shape = {out_features, in_features},
                 .kind = WeightKind::kProjection,
                 .fan_in = in_features});
  if (shape.use_bias) {
    out.push_back({.name = prefix + ".bias",
                   .shape = {out_features},
                   .kind = WeightKind::kBias,
                   .fan_in = in_features});
  }
}

void AddNorm(std::vector<TensorEntry>& out, const std::string& name, int64_t size) {
  out.push_back({.name = name, .shape = {size}, .kind = WeightKind::kNorm, .fan_in = size});
}

}  // namespace

absl::StatusOr<DenseShape> ShapeByName(const std::string& name) {
  if (name == "0.3b") return Ernie03B();
  if (name == "demo") return Demo();
  if (name == "21b-a3b") {
    return absl::UnimplementedError(
        "--shape 21b-a3b is not available yet: the MoE shape arrives with the "
        "mixture-of-experts issue");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --shape '", name, "' (expected demo, 0.3b or 21b-a3b)"));
}

std::vector<TensorEntry> DenseTensorList(const DenseShape& shape) {
  const int64_t h = shape.hidden_size;
  const int64_t q_width = shape.num_attention_heads * shape.head_dim;
  const int64_t kv_width = shape.num_key_value_heads * shape.head_dim;
  const int64_t inter = shape.intermediate_size;

  std::vector<TensorEntry> out;
  out.push_back({.name = "model.embed_tokens.weight",
                 .shape = {shape.vocab_size, h},
                 .kind = WeightKind::kEmbedding,
                 .fan_in = h});
  for (int64_t layer = 0; layer < shape.num_hidden_layers; ++layer) {
    const std::string p = absl::StrCat("model.layers.", layer);
    AddNorm(out, p + ".input_layernorm.weight", h);
    AddLinear(out, shape, p + ".self_attn.q_proj", q_width, h);
    AddLinear(out, shape, p + ".self_attn.k_proj", kv_width, h);
    AddLinear(out, shape, p + ".self_attn.v_proj", kv_width, h);
    AddLinear(out, shape, p + ".self_attn.o_proj", h, q_width);
    AddNorm(out, p + ".post_attention_layernorm.weight", h);
    AddLinear(out, shape, p + ".mlp.gate_proj", inter, h);
    AddLinear(out, shape, p + ".mlp.up_proj", inter, h);
    AddLinear(out, shape, p + ".mlp.down_proj", h, inter);
  }
  AddNorm(out, "model.norm.weight", h);
  if (!shape.tie_word_embeddings) {
    out.push_back({.name = "lm_head.weight",
                   .shape = {shape.vocab_size, h},
                   .kind = WeightKind::kProjection,
                   .fan_in = h});
  }
  return out;
}

int64_t NumElements(const TensorEntry& tensor) {
  int64_t n = 1;
  for (int64_t d : tensor.shape) n *= d;
  return n;
}

int64_t CountParameters(const std::vector<TensorEntry>& tensors) {
  int64_t total = 0;
  for (const TensorEntry& t : tensors) total += NumElements(t);
  return total;
}

}  // namespace ernie::make_model
