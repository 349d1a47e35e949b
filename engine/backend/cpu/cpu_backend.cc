#include "engine/backend/cpu/cpu_backend.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/elementwise.h"
#include "engine/backend/cpu/int4_linear.h"
#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/paged_attention.h"
#include "engine/util/status_macros.h"

namespace ernie::cpu {

namespace {

std::vector<float> Widen(const TensorView* t) {
  if (t == nullptr) return {};
  std::vector<float> out(static_cast<size_t>(t->numel()));
  WidenToFloat(*t, out.data());
  return out;
}

const float* OrNull(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }

}  // namespace

absl::StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create(const LoadedModel& model,
                                                               const CpuBackendOptions& options) {
  const ModelConfig& c = model.config;
  if (model.dummy_weights)
    return absl::InvalidArgumentError("--load-format dummy needs the CUDA backend (the CPU one runs checkpoint weights)");
  if (c.head_dim > 1024) return absl::InvalidArgumentError(absl::StrCat("head_dim ", c.head_dim, " is above 1024"));
  if (options.max_tokens_per_step <= 0) return absl::InvalidArgumentError("max_tokens_per_step must be positive");
  KvCacheShape shape{.num_layers = c.num_layers,
                     .num_kv_heads = c.num_kv_heads,
                     .head_dim = c.head_dim,
                     .block_size = options.block_size,
                     .num_blocks = options.num_blocks,
                     .bytes_per_element = 4};
  ERNIE_ASSIGN_OR_RETURN(CpuKvCache kv, CpuKvCache::Create(shape));
  return std::unique_ptr<CpuBackend>(
      new CpuBackend(model, std::move(kv), options.num_threads, options.max_tokens_per_step, options.observer));
}

CpuBackend::CpuBackend(const LoadedModel& model, CpuKvCache kv, int num_threads, int64_t max_tokens,
                       LinearInputObserver observer)
    : config_(model.config),
      weights_(model.weights),
      kv_(std::move(kv)),
      pool_(num_threads),
      max_tokens_(max_tokens),
      observer_(std::move(observer)),
      attn_scale_(1.0f / std::sqrt(static_cast<float>(model.config.head_dim))) {
  const ModelConfig& c = config_;
  for (const Ernie45LayerWeights& l : weights_.layers) {
    layer_vectors_.push_back({Widen(l.input_norm), Widen(l.post_attn_norm), Widen(l.q_proj.bias),
                              Widen(l.k_proj.bias), Widen(l.v_proj.bias), Widen(l.o_proj.bias),
                              Widen(l.gate_proj.bias), Widen(l.up_proj.bias), Widen(l.down_proj.bias)});
  }
  final_norm_ = Widen(weights_.final_norm);
  inv_freq_.resize(static_cast<size_t>(c.head_dim / 2));
  RotaryInverseFrequencies(c.rope_theta, c.head_dim, inv_freq_.data());
  const auto t = static_cast<size_t>(max_tokens);
  x_.resize(t * c.hidden_size);
  h_.resize(t * c.hidden_size);
  out_.resize(t * c.hidden_size);
  q_.resize(t * c.q_size());
  attn_.resize(t * c.q_size());
  k_.resize(t * c.kv_size());
  v_.resize(t * c.kv_size());
  gate_.resize(t * c.intermediate_size);
  up_.resize(t * c.intermediate_size);
}

void CpuBackend::Observe(int64_t layer, LinearInput which, const std::vector<float>& x, int64_t rows,
                         int64_t cols) const {
  if (observer_) observer_(layer, which, x.data(), rows, cols);
}

// x += o_proj(attention(rope(q), rope(k), v)) on RMSNorm(x).
void CpuBackend::AttentionBlock(const StepBatch& batch, int64_t layer, int64_t tokens) {
  const ModelConfig& c = config_;
  const Ernie45LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const LayerVectors& lv = layer_vectors_[static_cast<size_t>(layer)];
  RmsNorm(x_.data(), tokens, c.hidden_size, lv.input_norm.data(), c.rms_norm_eps, h_.data());
  Observe(layer, LinearInput::kQkv, h_, tokens, c.hidden_size);
  ApplyLinear(h_.data(), tokens, w.q_proj, OrNull(lv.q_bias), q_.data(), pool_);
  ApplyLinear(h_.data(), tokens, w.k_proj, OrNull(lv.k_bias), k_.data(), pool_);
  ApplyLinear(h_.data(), tokens, w.v_proj, OrNull(lv.v_bias), v_.data(), pool_);
  ApplyRotaryInterleaved(q_.data(), tokens, c.num_heads, c.head_dim, batch.positions, inv_freq_.data());
  ApplyRotaryInterleaved(k_.data(), tokens, c.num_kv_heads, c.head_dim, batch.positions, inv_freq_.data());
  WriteKv(batch, k_.data(), v_.data(), layer, kv_);
  PagedAttention(batch, seq_of_token_, q_.data(), c.num_heads, layer, kv_, attn_scale_, attn_.data(), pool_);
  Observe(layer, LinearInput::kOProj, attn_, tokens, c.q_size());
  ApplyLinear(attn_.data(), tokens, w.o_proj, OrNull(lv.o_bias), out_.data(), pool_);
  AddInPlace(x_.data(), out_.data(), tokens * c.hidden_size);
}

// x += down(silu(gate(h)) * up(h)) on h = RMSNorm(x); a MoE layer's MLP is
// the routed mixture of such MLPs (moe_block.h).
void CpuBackend::MlpBlock(int64_t layer, int64_t tokens) {
  const ModelConfig& c = config_;
  const Ernie45LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const LayerVectors& lv = layer_vectors_[static_cast<size_t>(layer)];
  RmsNorm(x_.data(), tokens, c.hidden_size, lv.post_attn_norm.data(), c.rms_norm_eps, h_.data());
  // A MoE block's input is its router's and every expert's gate/up input.
  Observe(layer, LinearInput::kGateUp, h_, tokens, c.hidden_size);
  if (w.is_moe) {
    MoeMlp(h_.data(), tokens, c, w.moe, moe_, out_.data(), pool_);
    AddInPlace(x_.data(), out_.data(), tokens * c.hidden_size);
    return;
  }
  ApplyLinear(h_.data(), tokens, w.gate_proj, OrNull(lv.gate_bias), gate_.data(), pool_);
  ApplyLinear(h_.data(), tokens, w.up_proj, OrNull(lv.up_bias), up_.data(), pool_);
  SiluAndMul(gate_.data(), up_.data(), tokens, c.intermediate_size, gate_.data());
  Observe(layer, LinearInput::kDown, gate_, tokens, c.intermediate_size);
  ApplyLinear(gate_.data(), tokens, w.down_proj, OrNull(lv.down_bias), out_.data(), pool_);
  AddInPlace(x_.data(), out_.data(), tokens * c.hidden_size);
}

absl::Status CpuBackend::Forward(const StepBatch& batch, std::span<float> logits) {
  ERNIE_RETURN_IF_ERROR(ValidateStepBatch(batch, kv_.shape(), max_tokens_, config_.vocab_size, logits));
  const ModelConfig& c = config_;
  const auto tokens = static_cast<int64_t>(batch.token_ids.size());

  SequenceOfEachToken(batch, &seq_of_token_);
  EmbeddingGather(*weights_.embed_tokens, batch.token_ids, x_.data());
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    AttentionBlock(batch, layer, tokens);
    MlpBlock(layer, tokens);
  }

  // Final norm and lm_head only for the rows that need logits.
  const auto rows = static_cast<int64_t>(batch.logit_token_indices.size());
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = batch.logit_token_indices[static_cast<size_t>(r)];
    RmsNorm(x_.data() + t * c.hidden_size, 1, c.hidden_size, final_norm_.data(), c.rms_norm_eps,
            h_.data() + r * c.hidden_size);
  }
  if (rows > 0) Linear(h_.data(), rows, c.hidden_size, *weights_.lm_head.weight, nullptr, logits.data(), pool_);
  return absl::OkStatus();
}

absl::Status CpuBackend::CopyBlocks(std::span<const BlockCopyOp> copies) {
  ERNIE_RETURN_IF_ERROR(ValidateBlockCopies(copies, kv_.shape()));
  const KvCacheShape& s = kv_.shape();
  for (const BlockCopyOp& c : copies) {
    const size_t bytes = static_cast<size_t>(c.num_tokens * s.head_dim) * sizeof(float);
    for (int64_t layer = 0; layer < s.num_layers; ++layer) {
      for (int64_t h = 0; h < s.num_kv_heads; ++h) {
        std::memcpy(kv_.keys(layer, c.dst_block, h), kv_.keys(layer, c.src_block, h), bytes);
        std::memcpy(kv_.values(layer, c.dst_block, h), kv_.values(layer, c.src_block, h), bytes);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ernie::cpu
