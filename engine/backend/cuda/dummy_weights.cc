// --load-format dummy: every device buffer UploadWeights would fill, of the
// same shapes and layouts, filled on the device (kernels/fill_random.h).
// Each buffer gets its own seed (seed + a running index), so no two
// matrices are equal. An AWQ config's linears and experts are int4 in the
// repacked layout (kernels/awq_gemm.h): random packed words and records.
#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/device_weights.h"
#include "engine/backend/cuda/kernels/fill_random.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

namespace {

constexpr float kInitStd = 0.02f;  // initializer_range of the ERNIE-4.5 configs
// AWQ scales: with q and z uniform in 0..15, q - z has standard deviation
// sqrt(2 * 255 / 12) ~ 6.5, so scales around 0.02 / 6.5 ~ 0.003 give the
// int4 weights about the spread of the bf16 ones.
constexpr float kAwqScaleMin = 0.002f, kAwqScaleMax = 0.004f;

// The int4 kernels' limits on one n x k linear (kernels/awq_gemm.h).
absl::Status CheckAwqShape(int64_t n, int64_t k, int64_t group, const std::string& what) {
  if (n % 8 == 0 && k % 64 == 0 && k % group == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--load-format dummy: ", what, " [", n, " out, ", k,
                                                 " in] does not fit the CUDA int4 kernels (outputs a multiple of 8, ",
                                                 "inputs of 64 and of group_size ", group, ")"));
}

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
  // AWQ arrays of `words` random packed words and `records` records.
  absl::Status FillAwq(DeviceBuffer<uint32_t>& packed, int64_t words, DeviceBuffer<uint32_t>& records,
                       int64_t record_words, const std::string& what) {
    ERNIE_ASSIGN_OR_RETURN(packed, DeviceBuffer<uint32_t>::Allocate(static_cast<size_t>(words), what + " (packed int4)"));
    ERNIE_ASSIGN_OR_RETURN(records, DeviceBuffer<uint32_t>::Allocate(static_cast<size_t>(record_words),
                                                                     what + " (scales and zeros)"));
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchFillRandomU32(packed.data(), words, ++seed_, nullptr), "dummy fill of " + what);
    ERNIE_CUDA_RETURN_IF_ERROR(
        LaunchFillAwqRecords(records.data(), record_words, ++seed_, kAwqScaleMin, kAwqScaleMax, nullptr),
        "dummy fill of " + what + " records");
    return absl::OkStatus();
  }
  absl::StatusOr<DeviceAwqLinear> AwqLinear(int64_t n, int64_t k, int64_t group, const std::string& what) {
    ERNIE_RETURN_IF_ERROR(CheckAwqShape(n, k, group, what));
    DeviceAwqLinear d{.n = static_cast<int32_t>(n), .k = static_cast<int32_t>(k), .group_size = static_cast<int32_t>(group)};
    ERNIE_RETURN_IF_ERROR(FillAwq(d.packed, AwqPackedWords(n, k), d.records, AwqRecordWords(n, k, group), what));
    return d;
  }
  // `experts` stacked experts of width `width` (device_awq_experts.h).
  absl::StatusOr<DeviceAwqExperts> AwqExperts(int64_t experts, int64_t hidden, int64_t width, int64_t group,
                                              const std::string& what) {
    ERNIE_RETURN_IF_ERROR(CheckAwqShape(2 * width, hidden, group, what + "experts' gate|up"));
    ERNIE_RETURN_IF_ERROR(CheckAwqShape(hidden, width, group, what + "experts' down"));
    DeviceAwqExperts d{.experts = static_cast<int32_t>(experts),
                       .hidden = static_cast<int32_t>(hidden),
                       .width = static_cast<int32_t>(width),
                       .group_size = static_cast<int32_t>(group)};
    ERNIE_RETURN_IF_ERROR(FillAwq(d.gate_up_packed, experts * AwqPackedWords(2 * width, hidden), d.gate_up_records,
                                  experts * AwqRecordWords(2 * width, hidden, group), what + "experts' gate|up"));
    ERNIE_RETURN_IF_ERROR(FillAwq(d.down_packed, experts * AwqPackedWords(hidden, width), d.down_records,
                                  experts * AwqRecordWords(hidden, width, group), what + "experts' down"));
    return d;
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
  // The checkpoint loader's AWQ rule: every linear of the layers is int4
  // (modules_to_not_convert aside, which a dummy config does not model).
  const int64_t group = c.awq.has_value() ? c.awq->group_size : 0;
  DummyFiller fill(seed);
  DeviceWeights d;
  d.awq_group_size = group;
  const int64_t h = c.hidden_size, qkv = c.q_size() + 2 * c.kv_size();
  ERNIE_ASSIGN_OR_RETURN(d.embed_tokens, fill.Matrix(c.vocab_size, h, "dummy embed_tokens"));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string layer = absl::StrCat("dummy layer ", i, " ");
    DeviceLayerWeights l;
    ERNIE_ASSIGN_OR_RETURN(l.input_norm, fill.Constant(h, 1.0f, layer + "input_layernorm"));
    ERNIE_ASSIGN_OR_RETURN(l.post_attn_norm, fill.Constant(h, 1.0f, layer + "post_attention_layernorm"));
    if (group > 0) {
      ERNIE_ASSIGN_OR_RETURN(l.qkv_awq, fill.AwqLinear(qkv, h, group, layer + "qkv_proj"));
      ERNIE_ASSIGN_OR_RETURN(l.o_awq, fill.AwqLinear(h, c.q_size(), group, layer + "o_proj"));
    } else {
      ERNIE_ASSIGN_OR_RETURN(l.qkv, fill.Matrix(qkv, h, layer + "qkv_proj"));
      ERNIE_ASSIGN_OR_RETURN(l.o_proj, fill.Matrix(h, c.q_size(), layer + "o_proj"));
    }
    ERNIE_ASSIGN_OR_RETURN(l.qkv_bias, fill.Bias(c.use_bias, qkv, layer + "qkv bias"));
    ERNIE_ASSIGN_OR_RETURN(l.o_bias, fill.Bias(c.use_bias, h, layer + "o_proj bias"));
    if (c.IsMoeLayer(i)) {
      const MoeConfig& m = c.moe;
      l.is_moe = true;
      ERNIE_ASSIGN_OR_RETURN(l.moe.router, fill.Uniform(m.num_experts * h, kInitStd * std::sqrt(3.0f), layer + "router"));
      ERNIE_ASSIGN_OR_RETURN(l.moe.correction_bias, fill.Uniform(m.num_experts, 1e-3f, layer + "e_score_correction_bias"));
      // The shared experts are S more of the same width (device_weights.h).
      const int64_t stacked = m.num_experts + m.num_shared_experts;
      if (group > 0) {
        // A checkpoint's shared experts split on whole groups (awq_expert_pack.h): the same rule here.
        if (m.num_shared_experts > 0 && m.intermediate_size % group != 0)
          return absl::InvalidArgumentError(absl::StrCat(
              "--load-format dummy: ", layer, "shared experts: moe_intermediate_size ", m.intermediate_size,
              " is not a multiple of group_size ", group, " (their down_proj splits on whole groups)"));
        ERNIE_ASSIGN_OR_RETURN(l.moe.awq, fill.AwqExperts(stacked, h, m.intermediate_size, group, layer));
      } else {
        ERNIE_ASSIGN_OR_RETURN(l.moe.experts_gate_up,
                               fill.Matrix(stacked * 2 * m.intermediate_size, h, layer + "experts' gate|up"));
        ERNIE_ASSIGN_OR_RETURN(l.moe.experts_down,
                               fill.Matrix(stacked * h, m.intermediate_size, layer + "experts' down"));
      }
    } else {
      if (group > 0) {
        ERNIE_ASSIGN_OR_RETURN(l.gate_up_awq, fill.AwqLinear(2 * c.intermediate_size, h, group, layer + "gate|up"));
        ERNIE_ASSIGN_OR_RETURN(l.down_awq, fill.AwqLinear(h, c.intermediate_size, group, layer + "down_proj"));
      } else {
        ERNIE_ASSIGN_OR_RETURN(l.gate_up, fill.Matrix(2 * c.intermediate_size, h, layer + "gate|up"));
        ERNIE_ASSIGN_OR_RETURN(l.down_proj, fill.Matrix(h, c.intermediate_size, layer + "down_proj"));
      }
      ERNIE_ASSIGN_OR_RETURN(l.gate_up_bias, fill.Bias(c.use_bias, 2 * c.intermediate_size, layer + "gate|up bias"));
      ERNIE_ASSIGN_OR_RETURN(l.down_bias, fill.Bias(c.use_bias, h, layer + "down_proj bias"));
    }
    for (const DeviceAwqLinear* a : {&l.qkv_awq, &l.o_awq, &l.gate_up_awq, &l.down_awq})
      d.max_awq_elements = std::max(d.max_awq_elements, int64_t{a->n} * a->k);
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
