// The model's weights in device memory, uploaded once at start: matrices in
// bf16 (f16 and f32 checkpoints are rounded to bf16 here, to nearest even),
// norm weights and biases in float32. Projections that read the same input
// are concatenated so one GEMM computes them: q|k|v and gate|up. An AWQ
// checkpoint's linears stay 4-bit (device_awq_linear.h) in the *_awq fields
// and leave the bf16 ones empty; embeddings and lm_head are bf16 either way.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/cuda/device_awq_experts.h"
#include "engine/backend/cuda/device_awq_linear.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/model/ernie4_5_weights.h"

namespace ernie::cuda {

// A mixture-of-experts MLP (absent from dense layers: every buffer empty).
// Experts are stacked so that one grouped launch (kernels/grouped_expert_gemv.h)
// reaches all of them; each expert's gate and up rows are interleaved in
// groups of 8 (8 gate rows, then the 8 up rows of the same features) so the
// gate/up launch can end in SiLU-and-mul. The shared experts (one MLP of
// width S x I) follow the E routed ones as S pseudo-experts of width I, its
// column blocks (moe_routing.h says why that is the same function). An AWQ
// checkpoint's experts stay int4 in `awq`, in the same order and interleave
// (device_awq_experts.h), and leave the two bf16 stacks empty.
struct DeviceMoeWeights {
  DeviceBuffer<float> router;              // [E, H] float32, as the router runs
  DeviceBuffer<float> correction_bias;     // [E]
  DeviceBuffer<uint16_t> experts_gate_up;  // bf16 [E + S, 2 I, H], interleaved as above
  DeviceBuffer<uint16_t> experts_down;     // bf16 [E + S, H, I]
  DeviceAwqExperts awq;                    // AWQ checkpoints only (else empty)
  int64_t bytes() const {
    return static_cast<int64_t>(router.bytes() + correction_bias.bytes() + experts_gate_up.bytes() +
                                experts_down.bytes()) +
           awq.bytes();
  }
};

struct DeviceLayerWeights {
  DeviceBuffer<float> input_norm;       // [H]
  DeviceBuffer<float> post_attn_norm;   // [H]
  DeviceBuffer<uint16_t> qkv;           // bf16 [(heads + 2 kv_heads) * head_dim, H]: rows q, then k, then v
  DeviceBuffer<float> qkv_bias;         // [(heads + 2 kv_heads) * head_dim], empty without use_bias
  DeviceBuffer<uint16_t> o_proj;        // bf16 [H, heads * head_dim]
  DeviceBuffer<float> o_bias;           // [H] or empty
  DeviceBuffer<uint16_t> gate_up;       // bf16 [2 I, H]: rows gate, then up
  DeviceBuffer<float> gate_up_bias;     // [2 I] or empty
  DeviceBuffer<uint16_t> down_proj;     // bf16 [H, I]
  DeviceBuffer<float> down_bias;        // [H] or empty
  // AWQ checkpoints only (else empty): the same four linears in int4.
  DeviceAwqLinear qkv_awq, o_awq, gate_up_awq, down_awq;
  bool is_moe = false;  // the MLP is `moe`; gate_up, down_proj and their biases are empty
  DeviceMoeWeights moe;
};

struct DeviceWeights {
  DeviceBuffer<uint16_t> embed_tokens;  // bf16 [V, H]
  std::vector<DeviceLayerWeights> layers;
  DeviceBuffer<float> final_norm;       // [H]
  DeviceBuffer<uint16_t> lm_head_own;   // bf16 [V, H] when untied; empty when tied
  const uint16_t* lm_head = nullptr;    // bf16 [V, H]: lm_head_own, or embed_tokens when tied
  int64_t awq_group_size = 0;           // 0: bf16 linears; else the layers' *_awq fields hold them
  int64_t max_awq_elements = 0;         // largest n x k of a dense AWQ linear (the prefill dequantise workspace)

  int64_t bytes() const;                // device bytes held, for the start-up report
};

// Converts and uploads every tensor of `weights`; ResourceExhausted when the
// device runs out of memory (the message names the tensor).
absl::StatusOr<DeviceWeights> UploadWeights(const Ernie45Weights& weights);

// Weights of `config`'s shapes made on the device from `seed` (vLLM's
// --load-format dummy): matrices uniform in +-0.02 sqrt(3) (std 0.02, the
// models' initializer_range), norm weights 1, biases and the router's
// correction bias small. For benchmarks of shapes too large to write to
// disk. A config with a quantization_config gets AWQ int4 linears and
// experts instead (random nibbles, zeros 0..15, fp16 scales that give the
// same spread; embeddings, lm_head, norms and router as above). dummy_weights.cc.
absl::StatusOr<DeviceWeights> MakeDummyWeights(const ModelConfig& config, uint64_t seed);

}  // namespace ernie::cuda
