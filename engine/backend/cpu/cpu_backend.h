// The CPU reference backend: the ERNIE-4.5 forward pass (dense, and MoE
// layers through moe_block.h) in float32,
// written straight through layer by layer (cpu_backend.cc), reading weights
// in place from the mapped checkpoint. Every other backend is tested against
// it. Not thread-safe: one engine thread calls Forward.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_kv_cache.h"
#include "engine/backend/cpu/moe_block.h"
#include "engine/model/ernie4_5_weights.h"
#include "engine/util/thread_pool.h"

namespace ernie::cpu {

// The inputs of a dense layer's linears, by the group that shares them.
enum class LinearInput { kQkv, kOProj, kGateUp, kDown };
// Sees x [rows, cols] before the linears of `which` in `layer` run (for
// calibration: tools/quantize collects AWQ's activation statistics here).
// Called on the engine thread; `x` is valid only during the call. MoE
// layers report kGateUp as the MoE block's input (the router's and every
// expert's) and no kDown (each expert's is its own: tools/quantize/moe_awq.h).
using LinearInputObserver =
    std::function<void(int64_t layer, LinearInput which, const float* x, int64_t rows, int64_t cols)>;

struct CpuBackendOptions {
  int num_threads = 0;                // 0: one per hardware thread
  int64_t block_size = 16;            // tokens per KV block
  int64_t num_blocks = 0;             // KV blocks in the pool
  int64_t max_tokens_per_step = 512;  // workspace size: most tokens one Forward carries
  LinearInputObserver observer;       // empty in serving
};

class CpuBackend final : public Backend {
 public:
  // `model` must outlive the backend (weights are views into its checkpoint).
  static absl::StatusOr<std::unique_ptr<CpuBackend>> Create(const LoadedModel& model, const CpuBackendOptions& options);

  std::string_view name() const override { return "cpu"; }
  const KvCacheShape& kv_shape() const override { return kv_.shape(); }
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_tokens_per_step() const override { return max_tokens_; }
  absl::Status Forward(const StepBatch& batch, std::span<float> logits) override;
  absl::Status CopyBlocks(std::span<const BlockCopyOp> copies) override;

 private:
  CpuBackend(const LoadedModel& model, CpuKvCache kv, int num_threads, int64_t max_tokens, LinearInputObserver observer);
  void Observe(int64_t layer, LinearInput which, const std::vector<float>& x, int64_t rows, int64_t cols) const;
  void AttentionBlock(const StepBatch& batch, int64_t layer, int64_t tokens);
  void MlpBlock(int64_t layer, int64_t tokens);

  // Small tensors widened to float32 once at start.
  struct LayerVectors {
    std::vector<float> input_norm, post_attn_norm;                 // [H]
    std::vector<float> q_bias, k_bias, v_bias, o_bias;             // empty without use_bias
    std::vector<float> gate_bias, up_bias, down_bias;
  };

  const ModelConfig& config_;
  const Ernie45Weights& weights_;
  CpuKvCache kv_;
  ThreadPool pool_;
  int64_t max_tokens_;
  LinearInputObserver observer_;  // calibration hook; usually empty
  std::vector<LayerVectors> layer_vectors_;
  std::vector<float> final_norm_;    // [H]
  std::vector<float> lm_head_bias_;  // never set for ERNIE-4.5; kept empty
  std::vector<float> inv_freq_;      // [head_dim / 2]
  float attn_scale_;                 // head_dim ^ -0.5

  // Workspaces, sized for max_tokens_ at start (Forward allocates nothing big).
  std::vector<float> x_;      // [T, H] residual stream
  std::vector<float> h_;      // [T, H] normed input of a block
  std::vector<float> q_;      // [T, heads*head_dim]
  std::vector<float> k_;      // [T, kv_heads*head_dim]
  std::vector<float> v_;      // [T, kv_heads*head_dim]
  std::vector<float> attn_;   // [T, heads*head_dim]
  std::vector<float> gate_;   // [T, I]
  std::vector<float> up_;     // [T, I]
  std::vector<float> out_;    // [T, H] block output before the residual add
  MoeWorkspace moe_;          // mixture-of-experts layers' scratch
  std::vector<int32_t> seq_of_token_;  // [T] each token's sequence in the step, built once per Forward
};

}  // namespace ernie::cpu
