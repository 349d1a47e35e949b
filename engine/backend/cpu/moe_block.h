// The mixture-of-experts MLP of ERNIE-4.5 on the CPU, as transformers'
// Ernie4_5_MoeSparseMoeBlock computes it:
//   router logits = x . router^T in float32; p = softmax(logits);
//   experts chosen by top_k of (p + e_score_correction_bias), but weighted
//   by the unbiased p, renormalised by their sum (clamped at moe_norm_min);
//   out = sum over chosen experts of w * expert(x)  (+ shared_experts(x)).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/ernie4_5_weights.h"
#include "engine/util/thread_pool.h"

namespace ernie::cpu {

// Per-token routing: experts[t * k + j] with weights[t * k + j], j < top_k,
// in decreasing order of the biased score.
struct MoeRouting {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

// Routes `tokens` rows of x ([tokens, hidden]).
void RouteTokens(const float* x, int64_t tokens, const ModelConfig& config, const MoeLayerWeights& w,
                 MoeRouting* routing, std::vector<float>& scratch, ThreadPool& pool);

// Scratch the MoE block reuses across steps (grows to the largest step).
struct MoeWorkspace {
  MoeRouting routing;
  std::vector<float> router_logits;           // [T, E]
  std::vector<float> gathered;                // [T, H] rows routed to one expert
  std::vector<float> gate, up;                // [T, max(width)]
  std::vector<float> expert_out;              // [T, H]
  std::vector<float> bias;                    // widened bias of one projection
  std::vector<std::vector<int32_t>> rows_of;  // expert -> (token * k + slot) entries
};

// out[t] = the MoE MLP of x[t] for `tokens` rows ([tokens, hidden]); out is overwritten.
void MoeMlp(const float* x, int64_t tokens, const ModelConfig& config, const MoeLayerWeights& w, MoeWorkspace& ws,
            float* out, ThreadPool& pool);

// A plain SiLU-gated MLP on `rows` rows: out = down(silu(gate(x)) * up(x)).
// gate/up: scratch of at least rows x width floats; bias: scratch for biases.
void GatedMlp(const float* x, int64_t rows, int64_t hidden, const MlpWeights& w, std::vector<float>& gate,
              std::vector<float>& up, std::vector<float>& bias, float* out, ThreadPool& pool);

}  // namespace ernie::cpu
