// The model shapes ernie-make-model can write, and the ordered list of
// tensors (Hugging Face names and shapes) each one has. Pure functions: no
// I/O, so tests can count parameters without writing a byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ernie::make_model {

// Mixture-of-experts hyper-parameters (Ernie4_5_MoeForCausalLM); num_experts
// 0 means a dense model.
struct MoeShape {
  int64_t num_experts = 0;        // moe_num_experts
  int64_t top_k = 0;              // moe_k
  int64_t num_shared_experts = 0; // moe_num_shared_experts
  int64_t intermediate_size = 0;  // moe_intermediate_size
  int64_t layer_start = 1;        // moe_layer_start_index
  int64_t layer_end = -1;         // moe_layer_end_index (-1: the last layer)
  int64_t layer_interval = 1;     // moe_layer_interval
};

// The hyper-parameters of an ERNIE-4.5 model (dense Ernie4_5ForCausalLM, or
// Ernie4_5_MoeForCausalLM when moe.num_experts > 0).
struct DenseShape {
  std::string name;  // "demo", "0.3b"
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 131072;
  double rms_norm_eps = 1e-5;
  double rope_theta = 500000.0;
  bool tie_word_embeddings = true;  // true: no lm_head.weight tensor
  bool use_bias = false;            // true: q/k/v/o and MLP projections carry .bias
  MoeShape moe;                     // experts, for the MoE shapes

  bool is_moe() const { return moe.num_experts > 0; }
  // ARCHITECTURE.md's rule for which layers are MoE.
  bool IsMoeLayer(int64_t i) const {
    const int64_t end = moe.layer_end < 0 ? num_hidden_layers - 1 : moe.layer_end;
    return is_moe() && i >= moe.layer_start && i <= end && (i + 1) % moe.layer_interval == 0;
  }
};

// What a tensor's random values should look like (see random_weights.h).
enum class WeightKind {
  kNorm,        // RMSNorm gain: around 1
  kEmbedding,   // token embeddings (also the tied output projection)
  kProjection,  // a linear layer's weight [out, in]: spread 1/sqrt(in)
  kBias,        // a linear layer's bias: small
};

struct TensorEntry {
  std::string name;            // e.g. "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // row-major, torch's [out, in] for linears
  WeightKind kind = WeightKind::kProjection;
  int64_t fan_in = 1;  // input features of a projection (its last dim)
};

// Looks a shape up by its command-line name: demo, 0.3b, demo-moe, 21b-a3b;
// anything else is InvalidArgument listing the choices.
absl::StatusOr<DenseShape> ShapeByName(const std::string& name);

// Tensors of `shape` in the order Hugging Face's state dict lists them:
// embeddings, then each layer, then the final norm (then lm_head if untied).
std::vector<TensorEntry> DenseTensorList(const DenseShape& shape);

// Number of elements of one tensor and of a whole list.
int64_t NumElements(const TensorEntry& tensor);
int64_t CountParameters(const std::vector<TensorEntry>& tensors);

}  // namespace ernie::make_model
