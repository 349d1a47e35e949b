#include "engine/backend/cpu/moe_block.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/backend/cpu/elementwise.h"
#include "engine/backend/cpu/int4_linear.h"
#include "engine/backend/cpu/linear.h"

namespace ernie::cpu {

namespace {

// Widens a bias (or returns null without one) into `scratch`.
const float* BiasOf(const LinearWeights& lin, std::vector<float>& scratch) {
  if (lin.bias == nullptr) return nullptr;
  scratch.resize(static_cast<size_t>(lin.bias->numel()));
  WidenToFloat(*lin.bias, scratch.data());
  return scratch.data();
}

}  // namespace

void GatedMlp(const float* x, int64_t rows, [[maybe_unused]] int64_t hidden, const MlpWeights& w, std::vector<float>& gate,
              std::vector<float>& up, std::vector<float>& bias, float* out, ThreadPool& pool) {
  const int64_t width = w.gate_proj.out_features();
  if (gate.size() < static_cast<size_t>(rows * width)) gate.resize(static_cast<size_t>(rows * width));
  if (up.size() < static_cast<size_t>(rows * width)) up.resize(static_cast<size_t>(rows * width));
  ApplyLinear(x, rows, w.gate_proj, BiasOf(w.gate_proj, bias), gate.data(), pool);
  ApplyLinear(x, rows, w.up_proj, BiasOf(w.up_proj, bias), up.data(), pool);
  SiluAndMul(gate.data(), up.data(), rows, width, gate.data());
  ApplyLinear(gate.data(), rows, w.down_proj, BiasOf(w.down_proj, bias), out, pool);
}

void RouteTokens(const float* x, int64_t tokens, const ModelConfig& config, const MoeLayerWeights& w,
                 MoeRouting* routing, std::vector<float>& logits, ThreadPool& pool) {
  const int64_t e = config.moe.num_experts, k = config.moe.top_k;
  logits.resize(static_cast<size_t>(tokens * e));
  Linear(x, tokens, config.hidden_size, *w.router, nullptr, logits.data(), pool);
  std::vector<float> bias(static_cast<size_t>(e));
  WidenToFloat(*w.correction_bias, bias.data());
  routing->experts.resize(static_cast<size_t>(tokens * k));
  routing->weights.resize(static_cast<size_t>(tokens * k));
  std::vector<float> probs(static_cast<size_t>(e));
  std::vector<int32_t> order(static_cast<size_t>(e));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits.data() + t * e;
    const float max_logit = *std::max_element(row, row + e);
    float sum = 0.0f;
    for (int64_t j = 0; j < e; ++j) sum += probs[static_cast<size_t>(j)] = std::exp(row[j] - max_logit);
    for (auto& p : probs) p /= sum;
    // Choose by the biased score (ties to the smaller expert id) ...
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      const float sa = probs[static_cast<size_t>(a)] + bias[static_cast<size_t>(a)];
      const float sb = probs[static_cast<size_t>(b)] + bias[static_cast<size_t>(b)];
      return sa > sb || (sa == sb && a < b);
    });
    // ... weigh by the unbiased probabilities, renormalised.
    float chosen = 0.0f;
    for (int64_t j = 0; j < k; ++j) chosen += probs[static_cast<size_t>(order[static_cast<size_t>(j)])];
    const float denom = std::max(chosen, config.moe.norm_min);
    for (int64_t j = 0; j < k; ++j) {
      const int32_t expert = order[static_cast<size_t>(j)];
      routing->experts[static_cast<size_t>(t * k + j)] = expert;
      routing->weights[static_cast<size_t>(t * k + j)] = probs[static_cast<size_t>(expert)] / denom;
    }
  }
}

void MoeMlp(const float* x, int64_t tokens, const ModelConfig& config, const MoeLayerWeights& w, MoeWorkspace& ws,
            float* out, ThreadPool& pool) {
  const int64_t h = config.hidden_size, e = config.moe.num_experts, k = config.moe.top_k;
  RouteTokens(x, tokens, config, w, &ws.routing, ws.router_logits, pool);
  // Group the (token, slot) pairs by expert, so each expert runs once over its rows.
  ws.rows_of.resize(static_cast<size_t>(e));
  for (auto& rows : ws.rows_of) rows.clear();
  for (int64_t i = 0; i < tokens * k; ++i) ws.rows_of[static_cast<size_t>(ws.routing.experts[static_cast<size_t>(i)])].push_back(static_cast<int32_t>(i));

  std::fill(out, out + tokens * h, 0.0f);
  ws.gathered.resize(static_cast<size_t>(tokens * h));
  ws.expert_out.resize(static_cast<size_t>(tokens * h));
  for (int64_t j = 0; j < e; ++j) {
    const auto& rows = ws.rows_of[static_cast<size_t>(j)];
    if (rows.empty()) continue;
    const auto n = static_cast<int64_t>(rows.size());
    for (int64_t r = 0; r < n; ++r)
      std::copy_n(x + (rows[static_cast<size_t>(r)] / k) * h, h, ws.gathered.begin() + r * h);
    GatedMlp(ws.gathered.data(), n, h, w.experts[static_cast<size_t>(j)], ws.gate, ws.up, ws.bias, ws.expert_out.data(),
             pool);
    for (int64_t r = 0; r < n; ++r) {
      const int32_t entry = rows[static_cast<size_t>(r)];
      const float weight = ws.routing.weights[static_cast<size_t>(entry)];
      float* dst = out + (entry / k) * h;
      const float* src = ws.expert_out.data() + r * h;
      for (int64_t i = 0; i < h; ++i) dst[i] += weight * src[i];
    }
  }
  // Shared experts last, as transformers adds them after the routed ones.
  if (w.has_shared) {
    GatedMlp(x, tokens, h, w.shared, ws.gate, ws.up, ws.bias, ws.expert_out.data(), pool);
    AddInPlace(out, ws.expert_out.data(), tokens * h);
  }
}

}  // namespace ernie::cpu
