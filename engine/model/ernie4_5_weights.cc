#include "engine/model/ernie4_5_weights.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/awq_format.h"
#include "engine/util/status_macros.h"

namespace ernie {

namespace {

absl::Status TensorError(const TensorView& t, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(t.file, ": tensor '", t.name, "' ", why));
}

// Binds `prefix`.{qweight, qzeros, scales} of a [out, in] linear, every part
// checked for presence, dtype and shape (awq_format.h).
absl::StatusOr<AwqLinearWeights> BindAwq(const Checkpoint& ckpt, const std::string& prefix, int64_t out, int64_t in,
                                         int64_t group) {
  AwqLinearWeights q;
  q.group_size = group;
  ERNIE_ASSIGN_OR_RETURN(q.qweight, ckpt.Find(prefix + ".qweight"));
  const std::string& file = q.qweight->file;
  for (const char* part : {".qzeros", ".scales"}) {
    if (!ckpt.Has(prefix + part))
      return absl::InvalidArgumentError(absl::StrCat(file, ": tensor '", prefix, ".qweight' has no '", prefix, part,
                                                     "' beside it (an AWQ linear needs qweight, qzeros and scales)"));
  }
  ERNIE_ASSIGN_OR_RETURN(q.qzeros, ckpt.Find(prefix + ".qzeros"));
  ERNIE_ASSIGN_OR_RETURN(q.scales, ckpt.Find(prefix + ".scales"));
  if (in % group != 0)
    return TensorError(*q.qweight, absl::StrCat("has ", in, " inputs, not a multiple of the AWQ group size ", group));
  if (out % 8 != 0)
    return TensorError(*q.qweight, absl::StrCat("has ", out, " outputs, not a multiple of 8 (eight 4-bit values per int32)"));
  struct Want {
    const TensorView* t;
    DType dtype;
    std::vector<int64_t> shape;
  };
  for (const Want& w : {Want{q.qweight, DType::kI32, {in, out / 8}}, Want{q.qzeros, DType::kI32, {in / group, out / 8}},
                        Want{q.scales, DType::kF16, {in / group, out}}}) {
    if (w.t->dtype != w.dtype)
      return TensorError(*w.t, absl::StrCat("has dtype ", std::string(DTypeSafetensorsName(w.t->dtype)), ", AWQ needs ",
                                            std::string(DTypeSafetensorsName(w.dtype))));
    if (w.t->shape != w.shape)
      return TensorError(*w.t, absl::StrCat("has shape ", ShapeToString(w.t->shape), ", expected ",
                                            ShapeToString(w.shape), " for a linear of ", in, " inputs, ", out,
                                            " outputs and group size ", group));
  }
  return q;
}

// What BindLinear needs besides names and sizes.
struct LinearContext {
  const Checkpoint& ckpt;
  const std::optional<AwqConfig>& awq;
  bool use_bias;
};

absl::StatusOr<LinearWeights> BindLinear(const LinearContext& ctx, const std::string& prefix, int64_t out, int64_t in) {
  const Checkpoint& ckpt = ctx.ckpt;
  LinearWeights lin;
  const bool quantized = ctx.awq.has_value() && ctx.awq->Quantizes(prefix);
  const bool has_weight = ckpt.Has(prefix + ".weight"), has_qweight = ckpt.Has(prefix + ".qweight");
  if (quantized) {
    if (has_weight && !has_qweight) {
      const TensorView& t = **ckpt.Find(prefix + ".weight");
      return TensorError(t, "is a float weight, but config.json's quantization_config makes this linear AWQ "
                            "(a half-quantized checkpoint? list it in modules_to_not_convert to keep it float)");
    }
    if (has_weight)
      return TensorError(**ckpt.Find(prefix + ".weight"), "sits beside an AWQ .qweight: one linear has two weights");
    ERNIE_ASSIGN_OR_RETURN(lin.awq, BindAwq(ckpt, prefix, out, in, ctx.awq->group_size));
  } else {
    if (has_qweight && !has_weight)
      return TensorError(**ckpt.Find(prefix + ".qweight"),
                         ctx.awq ? "is AWQ, but modules_to_not_convert keeps this linear float"
                                 : "is AWQ, but config.json has no quantization_config");
    ERNIE_ASSIGN_OR_RETURN(lin.weight, ckpt.FindWithShape(prefix + ".weight", {out, in}));
  }
  if (ctx.use_bias) {
    ERNIE_ASSIGN_OR_RETURN(lin.bias, ckpt.FindWithShape(prefix + ".bias", {out}));
  }
  return lin;
}

absl::StatusOr<MlpWeights> BindMlp(const LinearContext& ctx, const std::string& prefix, int64_t h, int64_t width) {
  MlpWeights m;
  ERNIE_ASSIGN_OR_RETURN(m.gate_proj, BindLinear(ctx, prefix + "gate_proj", width, h));
  ERNIE_ASSIGN_OR_RETURN(m.up_proj, BindLinear(ctx, prefix + "up_proj", width, h));
  ERNIE_ASSIGN_OR_RETURN(m.down_proj, BindLinear(ctx, prefix + "down_proj", h, width));
  return m;
}

absl::StatusOr<MoeLayerWeights> BindMoe(const ModelConfig& c, const LinearContext& ctx, const std::string& p) {
  const Checkpoint& ckpt = ctx.ckpt;
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
    ERNIE_ASSIGN_OR_RETURN(MlpWeights expert, BindMlp(ctx, absl::StrCat(p, "mlp.experts.", j, "."), h,
                                                      c.moe.intermediate_size));
    m.experts.push_back(expert);
  }
  if (c.moe.num_shared_experts > 0) {
    m.has_shared = true;
    ERNIE_ASSIGN_OR_RETURN(m.shared, BindMlp(ctx, p + "mlp.shared_experts.", h,
                                             c.moe.num_shared_experts * c.moe.intermediate_size));
  }
  return m;
}

}  // namespace

absl::StatusOr<Ernie45Weights> BindErnie45Weights(const ModelConfig& c, const Checkpoint& ckpt) {
  Ernie45Weights w;
  const int64_t h = c.hidden_size;
  const LinearContext ctx{ckpt, c.awq, c.use_bias};
  if (c.awq) w.awq_group_size = c.awq->group_size;
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
    ERNIE_ASSIGN_OR_RETURN(l.q_proj, BindLinear(ctx, p + "self_attn.q_proj", c.q_size(), h));
    ERNIE_ASSIGN_OR_RETURN(l.k_proj, BindLinear(ctx, p + "self_attn.k_proj", c.kv_size(), h));
    ERNIE_ASSIGN_OR_RETURN(l.v_proj, BindLinear(ctx, p + "self_attn.v_proj", c.kv_size(), h));
    ERNIE_ASSIGN_OR_RETURN(l.o_proj, BindLinear(ctx, p + "self_attn.o_proj", h, c.q_size()));
    if (c.IsMoeLayer(i)) {
      l.is_moe = true;
      ERNIE_ASSIGN_OR_RETURN(l.moe, BindMoe(c, ctx, p));
    } else {
      ERNIE_ASSIGN_OR_RETURN(l.gate_proj, BindLinear(ctx, p + "mlp.gate_proj", c.intermediate_size, h));
      ERNIE_ASSIGN_OR_RETURN(l.up_proj, BindLinear(ctx, p + "mlp.up_proj", c.intermediate_size, h));
      ERNIE_ASSIGN_OR_RETURN(l.down_proj, BindLinear(ctx, p + "mlp.down_proj", h, c.intermediate_size));
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

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(const std::string& model_dir, const std::string& load_format) {
  if (load_format == "auto" || load_format == "safetensors") return LoadModel(model_dir);
  if (load_format != "dummy")
    return absl::InvalidArgumentError(
        absl::StrCat("--load-format '", load_format, "' is not one of auto, safetensors, dummy"));
  auto model = std::make_unique<LoadedModel>();
  ERNIE_ASSIGN_OR_RETURN(model->config, LoadModelConfig(model_dir));
  model->dummy_weights = true;
  return model;
}

}  // namespace ernie
