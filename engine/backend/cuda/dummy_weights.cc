// --load-format dummy: every device buffer UploadWeights would fill, of the
// same shapes and layouts, filled on the device (kernels/fill_random.h).
// Each buffer gets its own seed (seed + a running index), so no two
// matrices are equal.
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/device_weights.h"
#include "engine/backend/cuda/kernels/fill_random.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

namespace {

constexpr float kInitStd = 0.02f;  // initializer_range of the ERNIE-4.5 configs

class DummyFiller {
 public:
  explicit DummyFiller(uint64_t seed) : seed_(seed) {}

  // bf16 [rows, cols] uniform with std kInitStd.
  absl::StatusOr<DeviceBuffer<uint16_t>> Matrix(int64_t rows, int64_t cols, const std::string& what) {
    ERNIE_ASSIGN_OR_RETURN(auto buf, DeviceBuffer<uint16_t>::Allocate(static_cast<size_t>(rows * cols), what));
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchFillUniformBf16(reinterpret_cast<__nv_bfloat16*>(buf.data()), rows * cols,
                                                     ++seed_, kInitStd * std::sqrt(3.0f), nullptr),
                               "dummy fill of " + what);
    return buf;
  }
  absl::StatusOr<DeviceBuffer<float>> Uniform(int64_t count, float scale, const std::string& what) {
    ERNIE_ASSIGN_OR_RETURN(auto buf, DeviceBuffer<float>::Allocate(static_cast<size_t>(count), what));
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchFillUniformF32(buf.data(), count, ++seed_, scale, nullptr),
                               "dummy fill of " + what);
    return buf;
  }
  absl::StatusOr<DeviceBuffer<float>> Constant(int64_t count, float value, const std::string& what) {
    ERNIE_ASSIGN_OR_RETURN(auto buf, DeviceBuffer<float>::Allocate(static_cast<size_t>(count), what));
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchFillConstantF32(buf.data(), count, value, nullptr), "dummy fill of " + what);
    return buf;
  }
  // A bias of `count` when the model has biases, else empty.
  absl::StatusOr<DeviceBuffer<float>> Bias(bool use_bias, int64_t count, const std::string& what) {
    if (!use_bias) return DeviceBuffer<float>();
    return Uniform(count, kInitStd, what);
  }

 private:
  uint64_t seed_;
};

}  // namespace

absl::StatusOr<DeviceWeights> MakeDummyWeights(const ModelConfig& c, uint64_t seed) {
  if (c.awq.has_value())
    return absl::InvalidArgumentError("--load-format dummy makes bf16 weights; the config has a quantization_config");
  DummyFiller fill(seed);
  DeviceWeights d;
  const int64_t h = c.hidden_size, qkv = c.q_size() + 2 * c.kv_size();
  ERNIE_ASSIGN_OR_RETURN(d.embed_tokens, fill.Matrix(c.vocab_size, h, "dummy embed_tokens"));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string layer = absl::StrCat("dummy layer ", i, " ");
    DeviceLayerWeights l;
    ERNIE_ASSIGN_OR_RETURN(l.input_norm, fill.Constant(h, 1.0f, layer + "input_layernorm"));
    ERNIE_ASSIGN_OR_RETURN(l.post_attn_norm, fill.Constant(h, 1.0f, layer + "post_attention_layernorm"));
    ERNIE_ASSIGN_OR_RETURN(l.qkv, fill.Matrix(qkv, h, layer + "qkv_proj"));
    ERNIE_ASSIGN_OR_RETURN(l.qkv_bias, fill.Bias(c.use_bias, qkv, layer + "qkv bias"));
    ERNIE_ASSIGN_OR_RETURN(l.o_proj, fill.Matrix(h, c.q_size(), layer + "o_proj"));
    ERNIE_ASSIGN_OR_RETURN(l.o_bias, fill.Bias(c.use_bias, h, layer + "o_proj bias"));
    if (c.IsMoeLayer(i)) {
      const MoeConfig& m = c.moe;
      l.is_moe = true;
      ERNIE_ASSIGN_OR_RETURN(l.moe.router, fill.Uniform(m.num_experts * h, kInitStd * std::sqrt(3.0f), layer + "router"));
      ERNIE_ASSIGN_OR_RETURN(l.moe.correction_bias, fill.Uniform(m.num_experts, 1e-3f, layer + "e_score_correction_bias"));
      // The shared experts are S more of the same width (device_weights.h).
      const int64_t stacked = m.num_experts + m.num_shared_experts;
      ERNIE_ASSIGN_OR_RETURN(l.moe.experts_gate_up,
                             fill.Matrix(stacked * 2 * m.intermediate_size, h, layer + "experts' gate|up"));
      ERNIE_ASSIGN_OR_RETURN(l.moe.experts_down, fill.Matrix(stacked * h, m.intermediate_size, layer + "experts' down"));
    } else {
      ERNIE_ASSIGN_OR_RETURN(l.gate_up, fill.Matrix(2 * c.intermediate_size, h, layer + "gate|up"));
      ERNIE_ASSIGN_OR_RETURN(l.gate_up_bias, fill.Bias(c.use_bias, 2 * c.intermediate_size, layer + "gate|up bias"));
      ERNIE_ASSIGN_OR_RETURN(l.down_proj, fill.Matrix(h, c.intermediate_size, layer + "down_proj"));
      ERNIE_ASSIGN_OR_RETURN(l.down_bias, fill.Bias(c.use_bias, h, layer + "down_proj bias"));
    }
    d.layers.push_back(std::move(l));
  }
  ERNIE_ASSIGN_OR_RETURN(d.final_norm, fill.Constant(h, 1.0f, "dummy final norm"));
  if (c.tie_word_embeddings) {
    d.lm_head = d.embed_tokens.data();
  } else {
    ERNIE_ASSIGN_OR_RETURN(d.lm_head_own, fill.Matrix(c.vocab_size, h, "dummy lm_head"));
    d.lm_head = d.lm_head_own.data();
  }
  ERNIE_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "dummy weight fills");
  return d;
}

}  // namespace ernie::cuda
