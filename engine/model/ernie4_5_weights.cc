#include "engine/model/ernie4_5_weights.h"

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"

namespace ernie {

namespace {

absl::StatusOr<LinearWeights> BindLinear(const Checkpoint& ckpt, const std::string& prefix, int64_t out, int64_t in,
                                         bool use_bias) {
  LinearWeights lin;
  ERNIE_ASSIGN_OR_RETURN(lin.weight, ckpt.FindWithShape(prefix + ".weight", {out, in}));
  if (use_bias) {
    ERNIE_ASSIGN_OR_RETURN(lin.bias, ckpt.FindWithShape(prefix + ".bias", {out}));
  }
  return lin;
}

absl::StatusOr<MlpWeights> BindMlp(const Checkpoint& ckpt, const std::string& prefix, int64_t h, int64_t width,
                                   bool use_bias) {
  MlpWeights m;
  ERNIE_ASSIGN_OR_RETURN(m.gate_proj, BindLinear(ckpt, prefix + "gate_proj", width, h, use_bias));
  ERNIE_ASSIGN_OR_RETURN(m.up_proj, BindLinear(ckpt, prefix + "up_proj", width, h, use_bias));
  ERNIE_ASSIGN_OR_RETURN(m.down_proj, BindLinear(ckpt, prefix + "down_proj", h, width, use_bias));
  return m;
}

absl::StatusOr<MoeLayerWeights> BindMoe(const ModelConfig& c, const Checkpoint& ckpt, const std::string& p) {
  MoeLayerWeights m;
  const int64_t h = c.hidden_size, e = c.moe.num_experts;
  ERNIE_ASSIGN_OR_RETURN(m.router, ckpt.FindWithShape(p + "mlp.gate.weight", {e, h}));
  // The release stores the bias as [1, E]; accept [E] too.
  ERNIE_ASSIGN_OR_RETURN(m.correction_bias, ckpt.Find(p + "mlp.moe_statics.e_score_correction_bias"));
  if (m.correction_bias->numel() != e)
    return absl::InvalidArgumentError(absl::StrCat(m.correction_bias->file, ": tensor '", m.correction_bias->name,
                                                   "' has shape ", ShapeToString(m.correction_bias->shape),
                                                   ", expected [1, ", e, "]"));
  for (int64_t j = 0; j < e; ++j) {
    ERNIE_ASSIGN_OR_RETURN(MlpWeights expert, BindMlp(ckpt, absl::StrCat(p, "mlp.experts.", j, "."), h,
                                                      c.moe.intermediate_size, c.use_bias));
    m.experts.push_back(expert);
  }
  if (c.moe.num_shared_experts > 0) {
    m.has_shared = true;
    ERNIE_ASSIGN_OR_RETURN(m.shared, BindMlp(ckpt, p + "mlp.shared_experts.", h,
                                             c.moe.num_shared_experts * c.moe.intermediate_size, c.use_bias));
  }
  return m;
}

}  // namespace

absl::StatusOr<Ernie45Weights> BindErnie45Weights(const ModelConfig& c, const Checkpoint& ckpt) {
  Ernie45Weights w;
  const int64_t h = c.hidden_size;
  ERNIE_ASSIGN_OR_RETURN(w.embed_tokens, ckpt.FindWithShape("model.embed_tokens.weight", {c.vocab_size, h}));
  ERNIE_ASSIGN_OR_RETURN(w.final_norm, ckpt.FindWithShape("model.norm.weight", {h}));
  if (c.tie_word_embeddings) {
    // Some exporters write the tied matrix anyway; the embedding is what HF uses.
    w.lm_head.weight = w.embed_tokens;
  } else {
    ERNIE_ASSIGN_OR_RETURN(w.lm_head.weight, ckpt.FindWithShape("lm_head.weight", {c.vocab_size, h}));
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    Ernie45LayerWeights l;
    ERNIE_ASSIGN_OR_RETURN(l.input_norm, ckpt.FindWithShape(p + "input_layernorm.weight", {h}));
    ERNIE_ASSIGN_OR_RETURN(l.post_attn_norm, ckpt.FindWithShape(p + "post_attention_layernorm.weight", {h}));
    ERNIE_ASSIGN_OR_RETURN(l.q_proj, BindLinear(ckpt, p + "self_attn.q_proj", c.q_size(), h, c.use_bias));
    ERNIE_ASSIGN_OR_RETURN(l.k_proj, BindLinear(ckpt, p + "self_attn.k_proj", c.kv_size(), h, c.use_bias));
    ERNIE_ASSIGN_OR_RETURN(l.v_proj, BindLinear(ckpt, p + "self_attn.v_proj", c.kv_size(), h, c.use_bias));
    ERNIE_ASSIGN_OR_RETURN(l.o_proj, BindLinear(ckpt, p + "self_attn.o_proj", h, c.q_size(), c.use_bias));
    if (c.IsMoeLayer(i)) {
      l.is_moe = true;
      ERNIE_ASSIGN_OR_RETURN(l.moe, BindMoe(c, ckpt, p));
    } else {
      ERNIE_ASSIGN_OR_RETURN(l.gate_proj, BindLinear(ckpt, p + "mlp.gate_proj", c.intermediate_size, h, c.use_bias));
      ERNIE_ASSIGN_OR_RETURN(l.up_proj, BindLinear(ckpt, p + "mlp.up_proj", c.intermediate_size, h, c.use_bias));
      ERNIE_ASSIGN_OR_RETURN(l.down_proj, BindLinear(ckpt, p + "mlp.down_proj", h, c.intermediate_size, c.use_bias));
    }
    w.layers.push_back(l);
  }
  return w;
}

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(const std::string& model_dir) {
  auto model = std::make_unique<LoadedModel>();
  ERNIE_ASSIGN_OR_RETURN(model->config, LoadModelConfig(model_dir));
  ERNIE_ASSIGN_OR_RETURN(model->checkpoint, Checkpoint::Open(model_dir));
  ERNIE_ASSIGN_OR_RETURN(model->weights, BindErnie45Weights(model->config, *model->checkpoint));
  return model;
}

}  // namespace ernie
