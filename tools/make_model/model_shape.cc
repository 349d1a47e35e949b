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

// baidu/ERNIE-4.5-21B-A3B-PT: layer 0 dense, layers 1-27 MoE (64 experts of
// 1536, top 6, 2 shared), tied embeddings: about 21.8B parameters, 3.35B active.
DenseShape Ernie21BA3B() {
  return DenseShape{.name = "21b-a3b",
                    .hidden_size = 2560,
                    .num_hidden_layers = 28,
                    .num_attention_heads = 20,
                    .num_key_value_heads = 4,
                    .head_dim = 128,
                    .intermediate_size = 12288,
                    .vocab_size = 103424,
                    .moe = {.num_experts = 64, .top_k = 6, .num_shared_experts = 2, .intermediate_size = 1536,
                            .layer_start = 1, .layer_end = -1, .layer_interval = 1}};
}

// The MoE layout at demo size (CPU tests and demos of the MoE path).
DenseShape DemoMoe() {
  DenseShape s = Demo();
  s.name = "demo-moe";
  s.moe = {.num_experts = 8, .top_k = 2, .num_shared_experts = 1, .intermediate_size = 128,
           .layer_start = 1, .layer_end = -1, .layer_interval = 1};
  return s;
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
  if (name == "21b-a3b") return Ernie21BA3B();
  if (name == "demo-moe") return DemoMoe();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --shape '", name, "' (expected demo, 0.3b, demo-moe or 21b-a3b)"));
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
    if (shape.IsMoeLayer(layer)) {
      // Names as Baidu's MoE release has them (per-expert tensors).
      const int64_t e = shape.moe.num_experts, width = shape.moe.intermediate_size;
      out.push_back({.name = p + ".mlp.gate.weight", .shape = {e, h}, .kind = WeightKind::kProjection, .fan_in = h});
      out.push_back({.name = p + ".mlp.moe_statics.e_score_correction_bias", .shape = {1, e}, .kind = WeightKind::kBias,
                     .fan_in = e});
      for (int64_t j = 0; j < e; ++j) {
        const std::string ep = absl::StrCat(p, ".mlp.experts.", j);
        AddLinear(out, shape, ep + ".gate_proj", width, h);
        AddLinear(out, shape, ep + ".up_proj", width, h);
        AddLinear(out, shape, ep + ".down_proj", h, width);
      }
      if (shape.moe.num_shared_experts > 0) {
        const int64_t shared = shape.moe.num_shared_experts * width;
        AddLinear(out, shape, p + ".mlp.shared_experts.gate_proj", shared, h);
        AddLinear(out, shape, p + ".mlp.shared_experts.up_proj", shared, h);
        AddLinear(out, shape, p + ".mlp.shared_experts.down_proj", h, shared);
      }
      continue;
    }
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
