// config.json of a Hugging Face ERNIE-4.5 model directory, validated.
// Both spellings in the wild are accepted: Baidu's release (top-level
// rope_theta, torch_dtype, architectures "Ernie4_5_ForCausalLM") and
// transformers 5's (rope_parameters {rope_theta, rope_type}, dtype).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/dtype.h"
#include "engine/model/quantization_config.h"

namespace ernie {

enum class Architecture { kErnie45Dense, kErnie45Moe };

// Mixture-of-experts settings (Ernie4_5_MoeForCausalLM only).
struct MoeConfig {
  int64_t num_experts = 0;          // moe_num_experts: routed experts per MoE layer
  int64_t top_k = 0;                // moe_k: experts chosen per token
  int64_t num_shared_experts = 0;   // moe_num_shared_experts: one MLP of width num_shared x intermediate
  int64_t intermediate_size = 0;    // moe_intermediate_size: width of one expert
  int64_t layer_start = 0;          // moe_layer_start_index
  int64_t layer_end = 0;            // moe_layer_end_index, -1 resolved to the last layer
  int64_t layer_interval = 1;       // moe_layer_interval
  float norm_min = 1e-12f;          // moe_norm_min: floor of the routing-weight sum
};

struct ModelConfig {
  Architecture architecture = Architecture::kErnie45Dense;
  std::string architecture_name;   // as spelled in config.json
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;           // query heads
  int64_t num_kv_heads = 0;        // key/value heads (GQA); divides num_heads
  int64_t head_dim = 0;            // from config, else hidden_size / num_heads
  int64_t intermediate_size = 0;
  float rms_norm_eps = 1e-5f;
  double rope_theta = 10000.0;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = true;  // no lm_head tensor: logits use embed_tokens
  bool use_bias = false;            // q/k/v/o and MLP projections carry biases
  DType dtype = DType::kBF16;       // declared dtype (tensors may differ; each is read as stored)
  int64_t bos_token_id = 1;
  std::vector<int64_t> eos_token_ids;  // config's eos_token_id (int or list)
  int64_t pad_token_id = 0;
  MoeConfig moe;                       // used when architecture == kErnie45Moe
  std::optional<AwqConfig> awq;        // quantization_config of an AWQ checkpoint; nullopt: float weights

  // Whether layer i's MLP is a mixture of experts (ARCHITECTURE.md's rule).
  bool IsMoeLayer(int64_t i) const {
    return architecture == Architecture::kErnie45Moe && i >= moe.layer_start && i <= moe.layer_end &&
           (i + 1) % moe.layer_interval == 0;
  }
  int64_t q_size() const { return num_heads * head_dim; }
  int64_t kv_size() const { return num_kv_heads * head_dim; }
  // Parameters of the model described (for reports and tests).
  int64_t ParameterCount() const;
  // Parameters a token reads (routed experts count top_k of num_experts).
  int64_t ActiveParameterCount() const;
};

// Parses config.json text. `file_name` labels errors, which name the key and
// why (missing, wrong type, out of range, unsupported architecture).
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text, absl::string_view file_name);
// Reads and parses DIR/config.json.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);

}  // namespace ernie
