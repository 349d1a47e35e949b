// The tensors of an ERNIE-4.5 model (dense, or MoE layers), found by name in a checkpoint and
// checked against the config's shapes. Views only: the checkpoint owns bytes.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/awq_format.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"

namespace ernie {

// y = x W^T (+ b). Exactly one of two forms is bound, and every backend must
// check which (is_awq()) before touching `weight`:
//  - float: `weight` is [out, in] as torch's nn.Linear stores it (F32/F16/BF16);
//  - AWQ (the model's config has quantization_config and the module is not in
//    modules_to_not_convert): `weight` is nullptr and `awq` holds the packed
//    4-bit tensors, W^T = (q - z) * s per group of inputs.
// The bias is float in both forms.
struct LinearWeights {
  const TensorView* weight = nullptr;  // [out, in]; nullptr when is_awq()
  const TensorView* bias = nullptr;    // [out], or nullptr without use_bias
  AwqLinearWeights awq;                // set when is_awq()
  bool is_awq() const { return awq.qweight != nullptr; }
  int64_t out_features() const { return is_awq() ? awq.out_features() : weight->shape[0]; }
  int64_t in_features() const { return is_awq() ? awq.in_features() : weight->shape[1]; }
};

// One SiLU-gated MLP: down(silu(gate(x)) * up(x)).
struct MlpWeights {
  LinearWeights gate_proj;  // [width, H]
  LinearWeights up_proj;    // [width, H]
  LinearWeights down_proj;  // [H, width]
};

// A mixture-of-experts MLP (Ernie4_5_MoeSparseMoeBlock).
struct MoeLayerWeights {
  const TensorView* router = nullptr;           // [E, H] mlp.gate.weight (float32 in the release)
  const TensorView* correction_bias = nullptr;  // [1, E] mlp.moe_statics.e_score_correction_bias
  std::vector<MlpWeights> experts;              // E experts of width moe_intermediate_size
  bool has_shared = false;
  MlpWeights shared;                            // width num_shared x moe_intermediate_size
};

struct Ernie45LayerWeights {
  const TensorView* input_norm = nullptr;      // [H] input_layernorm
  const TensorView* post_attn_norm = nullptr;  // [H] post_attention_layernorm
  LinearWeights q_proj;  // [heads*head_dim, H]
  LinearWeights k_proj;  // [kv_heads*head_dim, H]
  LinearWeights v_proj;  // [kv_heads*head_dim, H]
  LinearWeights o_proj;  // [H, heads*head_dim]
  LinearWeights gate_proj;  // [I, H] (dense layers)
  LinearWeights up_proj;    // [I, H]
  LinearWeights down_proj;  // [H, I]
  bool is_moe = false;      // this layer's MLP is `moe`, not the three above
  MoeLayerWeights moe;
};

struct Ernie45Weights {
  const TensorView* embed_tokens = nullptr;  // [V, H]
  std::vector<Ernie45LayerWeights> layers;
  const TensorView* final_norm = nullptr;    // [H]
  LinearWeights lm_head;                     // [V, H]: embed_tokens itself when tied (never AWQ)
  // AWQ group size of the quantized linears; 0 when every linear is float.
  // Embeddings, lm_head, norms and the MoE router always stay float.
  int64_t awq_group_size = 0;
};

// Finds every tensor; errors name the tensor, its file and the shape wanted.
// For an AWQ config (config.awq), each q/k/v/o/gate/up/down linear (dense
// layers, MoE experts, shared experts) not in modules_to_not_convert must
// have .qweight/.qzeros/.scales and no .weight; a float config must have no
// .qweight anywhere. Errors name the tensor and file: wrong dtype or shape,
// a missing part, in not divisible by the group, out not divisible by 8, a
// linear left float (or quantized) against the config.
absl::StatusOr<Ernie45Weights> BindErnie45Weights(const ModelConfig& config, const Checkpoint& checkpoint);

// A loaded model: config, defaults, the mapped checkpoint and bound weights.
// With dummy_weights (vLLM's --load-format dummy) there is no checkpoint and
// `weights` is empty: a backend that can makes random weights of the
// config's shapes itself (the CUDA one, on the device); others refuse it.
struct LoadedModel {
  ModelConfig config;
  std::unique_ptr<Checkpoint> checkpoint;
  Ernie45Weights weights;
  bool dummy_weights = false;
};

// Reads config.json and the safetensors of `model_dir` and binds the weights.
absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(const std::string& model_dir);

// How a model's weights are found: "auto" and "safetensors" read the
// checkpoint (LoadModel); "dummy" reads config.json only and leaves the
// weights to the backend (LoadedModel::dummy_weights). Anything else is
// InvalidArgument naming the choices.
absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(const std::string& model_dir, const std::string& load_format);

}  // namespace ernie
