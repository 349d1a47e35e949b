#include "engine/backend/cuda/device_weights.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>

#include "engine/util/half.h"

namespace ernie::cuda {

namespace {

// Whether `t` is bf16 in place: its bytes can be read as uint16_t bf16 bits
// straight from the checkpoint's mapping.
bool Bf16InPlace(const TensorView& t) {
  return t.dtype == DType::kBF16 && reinterpret_cast<uintptr_t>(t.data()) % alignof(uint16_t) == 0;
}

// Appends `t` to `out` as bf16 bits.
void AppendBf16(const TensorView& t, std::vector<uint16_t>& out) {
  const int64_t n = t.numel();
  const auto* src16 = static_cast<const uint16_t*>(t.data());
  if (Bf16InPlace(t)) {  // one pass over the bytes: no zero-fill before the copy
    out.insert(out.end(), src16, src16 + n);
    return;
  }
  const size_t base = out.size();
  out.resize(base + static_cast<size_t>(n));
  uint16_t* dst = out.data() + base;
  switch (t.dtype) {
    case DType::kBF16:
      std::memcpy(dst, src16, static_cast<size_t>(n) * 2);
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBf16(F16ToFloat(src16[i]));
      break;
    case DType::kF32: {
      const auto* src = static_cast<const float*>(t.data());
      for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBf16(src[i]);
      break;
    }
    case DType::kI32: break;  // AWQ's packed words: never a bf16 matrix or a vector (device_awq_linear.cc)
  }
}

void AppendF32(const TensorView& t, std::vector<float>& out) {
  const int64_t n = t.numel();
  const size_t base = out.size();
  out.resize(base + static_cast<size_t>(n));
  float* dst = out.data() + base;
  const auto* src16 = static_cast<const uint16_t*>(t.data());
  switch (t.dtype) {
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFloat(src16[i]);
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToFloat(src16[i]);
      break;
    case DType::kF32:
      std::memcpy(dst, t.data(), static_cast<size_t>(n) * 4);
      break;
    case DType::kI32: break;  // AWQ's packed words: never a bf16 matrix or a vector (device_awq_linear.cc)
  }
}

template <typename T>
absl::StatusOr<DeviceBuffer<T>> Upload(const std::vector<T>& host, const std::string& what) {
  ERNIE_ASSIGN_OR_RETURN(DeviceBuffer<T> buf, DeviceBuffer<T>::Allocate(host.size(), what));
  if (!host.empty())
    ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(buf.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
                               "cudaMemcpy of " + what);
  return buf;
}

// Row-concatenation of several [out_i, in] matrices as one bf16 [sum out_i, in].
absl::StatusOr<DeviceBuffer<uint16_t>> UploadMatrices(std::initializer_list<const TensorView*> parts,
                                                      std::vector<uint16_t>& staging) {
  staging.clear();
  std::string what;
  for (const TensorView* t : parts) {
    AppendBf16(*t, staging);
    what += (what.empty() ? "" : " + ") + t->name;
  }
  return Upload(staging, what);
}

// Concatenated biases as float32, or an empty buffer when the model has none.
absl::StatusOr<DeviceBuffer<float>> UploadVectors(std::initializer_list<const TensorView*> parts) {
  std::vector<float> host;
  std::string what;
  for (const TensorView* t : parts) {
    if (t == nullptr) return DeviceBuffer<float>();  // use_bias is all or nothing
    AppendF32(*t, host);
    what += (what.empty() ? "" : " + ") + t->name;
  }
  return Upload(host, what);
}

// `t`'s values as bf16 bits: a view of the checkpoint's own bytes when they
// are bf16 (no copy), else widened into `scratch`.
std::span<const uint16_t> AsBf16(const TensorView& t, std::vector<uint16_t>& scratch) {
  if (Bf16InPlace(t)) return {static_cast<const uint16_t*>(t.data()), static_cast<size_t>(t.numel())};
  scratch.clear();
  AppendBf16(t, scratch);
  return scratch;
}

// Rows [first, first + width) of gate and up, interleaved for the grouped
// gate/up launch (device_weights.h): groups of 16 rows, 8 of gate then 8 of up.
void AppendInterleavedGateUp(std::span<const uint16_t> gate, std::span<const uint16_t> up, int64_t hidden,
                             int64_t first, int64_t width, std::vector<uint16_t>& out) {
  for (int64_t f0 = first; f0 < first + width; f0 += 8)
    for (const std::span<const uint16_t> part : {gate, up})
      out.insert(out.end(), part.begin() + f0 * hidden, part.begin() + (f0 + 8) * hidden);
}

// Columns [first, first + width) of a bf16 [rows, cols] matrix.
void AppendColumns(std::span<const uint16_t> m, int64_t rows, int64_t cols, int64_t first, int64_t width,
                   std::vector<uint16_t>& out) {
  for (int64_t r = 0; r < rows; ++r)
    out.insert(out.end(), m.begin() + r * cols + first, m.begin() + r * cols + first + width);
}

absl::StatusOr<DeviceMoeWeights> UploadMoe(const MoeLayerWeights& m, std::vector<uint16_t>& staging) {
  DeviceMoeWeights d;
  auto no_bias = [](const MlpWeights& e) {
    return e.gate_proj.bias == nullptr && e.up_proj.bias == nullptr && e.down_proj.bias == nullptr;
  };
  auto all_awq = [](const MlpWeights& e) { return e.gate_proj.is_awq() && e.up_proj.is_awq() && e.down_proj.is_awq(); };
  // The loader binds all of a model's linears in one form.
  if (all_awq(m.experts[0])) {
    const int64_t width = m.experts[0].gate_proj.out_features();
    for (const MlpWeights& e : m.experts)
      if (!no_bias(e) || !all_awq(e))
        return absl::InvalidArgumentError("the CUDA backend runs AWQ MoE experts without biases, all of them int4");
    if (m.has_shared && (!no_bias(m.shared) || !all_awq(m.shared)))
      return absl::InvalidArgumentError("the CUDA backend runs AWQ shared experts without biases, in int4");
    ERNIE_ASSIGN_OR_RETURN(d.router, UploadVectors({m.router}));
    ERNIE_ASSIGN_OR_RETURN(d.correction_bias, UploadVectors({m.correction_bias}));
    ERNIE_ASSIGN_OR_RETURN(d.awq, UploadAwqExperts(m, width));
    return d;
  }
  const int64_t width = m.experts[0].gate_proj.weight->shape[0], hidden = m.experts[0].gate_proj.weight->shape[1];
  auto float_no_bias = [&](const MlpWeights& e) {
    return !e.gate_proj.is_awq() && !e.up_proj.is_awq() && !e.down_proj.is_awq() && no_bias(e);
  };
  for (const MlpWeights& e : m.experts)
    if (!float_no_bias(e) || width % 8 != 0)
      return absl::InvalidArgumentError(
          "the CUDA backend runs MoE experts in bf16 without biases, of a width divisible by 8");
  if (m.has_shared && (!float_no_bias(m.shared) || m.shared.gate_proj.weight->shape[0] % width != 0))
    return absl::InvalidArgumentError("the CUDA backend runs shared experts in bf16 without biases, of a width "
                                      "that is a multiple of moe_intermediate_size");
  ERNIE_ASSIGN_OR_RETURN(d.router, UploadVectors({m.router}));
  ERNIE_ASSIGN_OR_RETURN(d.correction_bias, UploadVectors({m.correction_bias}));
  // bf16 checkpoints are read straight from the mapping into the upload's
  // staging (one copy); other dtypes are widened once, the routed experts'
  // one at a time, the shared experts' (split into S pseudo-experts) kept
  // for both stacks.
  std::vector<uint16_t> gate_scratch, up_scratch, shared_gate_scratch, shared_up_scratch, shared_down_scratch;
  const int64_t shared = m.has_shared ? m.shared.gate_proj.weight->shape[0] / width : 0;
  std::span<const uint16_t> shared_gate, shared_up, shared_down;
  if (m.has_shared) {
    shared_gate = AsBf16(*m.shared.gate_proj.weight, shared_gate_scratch);
    shared_up = AsBf16(*m.shared.up_proj.weight, shared_up_scratch);
    shared_down = AsBf16(*m.shared.down_proj.weight, shared_down_scratch);
  }
  staging.clear();
  for (const MlpWeights& e : m.experts)
    AppendInterleavedGateUp(AsBf16(*e.gate_proj.weight, gate_scratch), AsBf16(*e.up_proj.weight, up_scratch), hidden,
                            0, width, staging);
  for (int64_t s = 0; s < shared; ++s) AppendInterleavedGateUp(shared_gate, shared_up, hidden, s * width, width, staging);
  ERNIE_ASSIGN_OR_RETURN(d.experts_gate_up,
                         Upload(staging, m.experts[0].gate_proj.weight->name + " (all experts' gate|up)"));
  staging.clear();
  for (const MlpWeights& e : m.experts) AppendBf16(*e.down_proj.weight, staging);
  for (int64_t s = 0; s < shared; ++s) AppendColumns(shared_down, hidden, shared * width, s * width, width, staging);
  ERNIE_ASSIGN_OR_RETURN(d.experts_down, Upload(staging, m.experts[0].down_proj.weight->name + " (all experts' down)"));
  return d;
}

}  // namespace

int64_t DeviceWeights::bytes() const {
  int64_t total = static_cast<int64_t>(embed_tokens.bytes() + final_norm.bytes() + lm_head_own.bytes());
  for (const DeviceLayerWeights& l : layers) {
    total += static_cast<int64_t>(l.input_norm.bytes() + l.post_attn_norm.bytes() + l.qkv.bytes() + l.qkv_bias.bytes() +
                                  l.o_proj.bytes() + l.o_bias.bytes() + l.gate_up.bytes() + l.gate_up_bias.bytes() +
                                  l.down_proj.bytes() + l.down_bias.bytes()) +
             l.qkv_awq.bytes() + l.o_awq.bytes() + l.gate_up_awq.bytes() + l.down_awq.bytes() + l.moe.bytes();
  }
  return total;
}

absl::StatusOr<DeviceWeights> UploadWeights(const Ernie45Weights& w) {
  DeviceWeights d;
  d.awq_group_size = w.awq_group_size;
  std::vector<uint16_t> staging;
  ERNIE_ASSIGN_OR_RETURN(d.embed_tokens, UploadMatrices({w.embed_tokens}, staging));
  for (const Ernie45LayerWeights& l : w.layers) {
    DeviceLayerWeights dl;
    ERNIE_ASSIGN_OR_RETURN(dl.input_norm, UploadVectors({l.input_norm}));
    ERNIE_ASSIGN_OR_RETURN(dl.post_attn_norm, UploadVectors({l.post_attn_norm}));
    // The loader binds all of a model's linears in one form (AWQ or float).
    if (l.q_proj.is_awq()) {
      ERNIE_ASSIGN_OR_RETURN(dl.qkv_awq, UploadAwqLinears({&l.q_proj.awq, &l.k_proj.awq, &l.v_proj.awq}));
      ERNIE_ASSIGN_OR_RETURN(dl.o_awq, UploadAwqLinears({&l.o_proj.awq}));
      if (!l.is_moe) {
        ERNIE_ASSIGN_OR_RETURN(dl.gate_up_awq, UploadAwqLinears({&l.gate_proj.awq, &l.up_proj.awq}));
        ERNIE_ASSIGN_OR_RETURN(dl.down_awq, UploadAwqLinears({&l.down_proj.awq}));
      }
      for (const DeviceAwqLinear* a : {&dl.qkv_awq, &dl.o_awq, &dl.gate_up_awq, &dl.down_awq})
        d.max_awq_elements = std::max(d.max_awq_elements, int64_t{a->n} * a->k);
    } else {
      ERNIE_ASSIGN_OR_RETURN(dl.qkv, UploadMatrices({l.q_proj.weight, l.k_proj.weight, l.v_proj.weight}, staging));
      ERNIE_ASSIGN_OR_RETURN(dl.o_proj, UploadMatrices({l.o_proj.weight}, staging));
      if (!l.is_moe) {
        ERNIE_ASSIGN_OR_RETURN(dl.gate_up, UploadMatrices({l.gate_proj.weight, l.up_proj.weight}, staging));
        ERNIE_ASSIGN_OR_RETURN(dl.down_proj, UploadMatrices({l.down_proj.weight}, staging));
      }
    }
    ERNIE_ASSIGN_OR_RETURN(dl.qkv_bias, UploadVectors({l.q_proj.bias, l.k_proj.bias, l.v_proj.bias}));
    ERNIE_ASSIGN_OR_RETURN(dl.o_bias, UploadVectors({l.o_proj.bias}));
    if (l.is_moe) {
      dl.is_moe = true;
      ERNIE_ASSIGN_OR_RETURN(dl.moe, UploadMoe(l.moe, staging));
    } else {
      ERNIE_ASSIGN_OR_RETURN(dl.gate_up_bias, UploadVectors({l.gate_proj.bias, l.up_proj.bias}));
      ERNIE_ASSIGN_OR_RETURN(dl.down_bias, UploadVectors({l.down_proj.bias}));
    }
    d.layers.push_back(std::move(dl));
  }
  ERNIE_ASSIGN_OR_RETURN(d.final_norm, UploadVectors({w.final_norm}));
  if (w.lm_head.weight == w.embed_tokens) {
    d.lm_head = d.embed_tokens.data();
  } else {
    ERNIE_ASSIGN_OR_RETURN(d.lm_head_own, UploadMatrices({w.lm_head.weight}, staging));
    d.lm_head = d.lm_head_own.data();
  }
  return d;
}

}  // namespace ernie::cuda
