#include "tools/quantize/moe_awq.h"

#include <algorithm>
#include <cmath>

#include "engine/backend/cpu/elementwise.h"
#include "engine/backend/cpu/int4_linear.h"
#include "engine/backend/cpu/moe_block.h"

namespace ernie::quantize {

namespace {

FloatMlp LoadFloatMlp(const MlpWeights& m) {
  return {LoadFloatLinear(m.gate_proj), LoadFloatLinear(m.up_proj), LoadFloatLinear(m.down_proj)};
}

// silu(x gate^T) * (x up^T), the input of an expert's down_proj, computed
// from the checkpoint's own weights (biases too) as the model computes it.
std::vector<float> SiluProduct(const float* x, int64_t rows, const MlpWeights& m, ThreadPool& pool) {
  const int64_t width = m.gate_proj.out_features();
  std::vector<float> gate(static_cast<size_t>(rows * width)), up(gate.size());
  auto bias = [](const LinearWeights& lin, std::vector<float>& scratch) -> const float* {
    if (lin.bias == nullptr) return nullptr;
    scratch = WidenTensor(*lin.bias);
    return scratch.data();
  };
  std::vector<float> gate_bias, up_bias;
  cpu::ApplyLinear(x, rows, m.gate_proj, bias(m.gate_proj, gate_bias), gate.data(), pool);
  cpu::ApplyLinear(x, rows, m.up_proj, bias(m.up_proj, up_bias), up.data(), pool);
  cpu::SiluAndMul(gate.data(), up.data(), rows, width, gate.data());
  return gate;
}

ScaleSearchResult SearchDown(const std::vector<float>& product, int64_t rows, const FloatMlp& f, int64_t group,
                             int grid, ThreadPool& pool) {
  const int64_t width = f.down.in();
  if (rows == 0) return RoundToNearestScales(width);
  const SearchInput input{product.data(), rows, {{f.down.w.data(), f.down.out()}}};
  return SearchScales({&input, 1}, width, MeanAbsPerColumn(product, width), group, grid, pool);
}

}  // namespace

FloatMoeMlp LoadFloatMoeMlp(const MoeLayerWeights& w) {
  FloatMoeMlp f;
  for (const MlpWeights& e : w.experts) f.experts.push_back(LoadFloatMlp(e));
  if (w.has_shared) f.shared = LoadFloatMlp(w.shared);
  f.router = WidenTensor(*w.router);
  return f;
}

MoeMlpScales SearchMoeMlpScales(const ModelConfig& config, const MoeLayerWeights& w, const GroupActivations& input,
                                const FloatMoeMlp& f, int64_t group, int grid, ThreadPool& pool) {
  const int64_t h = input.cols, tokens = input.num_rows(), k = config.moe.top_k;
  const auto num_experts = static_cast<int64_t>(f.experts.size());
  cpu::MoeRouting routing;
  std::vector<float> scratch;
  cpu::RouteTokens(input.rows.data(), tokens, config, w, &routing, scratch, pool);
  // Each expert's rows, in token order.
  std::vector<std::vector<float>> routed(static_cast<size_t>(num_experts));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < k; ++j) {
      auto& dst = routed[static_cast<size_t>(routing.experts[static_cast<size_t>(t * k + j)])];
      dst.insert(dst.end(), input.rows.begin() + t * h, input.rows.begin() + (t + 1) * h);
    }

  MoeMlpScales s;
  std::vector<SearchInput> gate_up;
  for (int64_t e = 0; e < num_experts; ++e) {
    const FloatMlp& m = f.experts[static_cast<size_t>(e)];
    const int64_t rows = static_cast<int64_t>(routed[static_cast<size_t>(e)].size()) / h;
    s.routed_rows.push_back(rows);
    gate_up.push_back({routed[static_cast<size_t>(e)].data(), rows, {{m.gate.w.data(), m.gate.out()}, {m.up.w.data(), m.up.out()}}});
  }
  if (f.shared)
    gate_up.push_back({input.rows.data(), tokens, {{f.shared->gate.w.data(), f.shared->gate.out()}, {f.shared->up.w.data(), f.shared->up.out()}}});
  s.gate_up = SearchScales(gate_up, h, input.mean_abs, group, grid, pool);

  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t rows = s.routed_rows[static_cast<size_t>(e)];
    const std::vector<float> product =
        rows == 0 ? std::vector<float>{} : SiluProduct(routed[static_cast<size_t>(e)].data(), rows, w.experts[static_cast<size_t>(e)], pool);
    s.down.push_back(SearchDown(product, rows, f.experts[static_cast<size_t>(e)], group, grid, pool));
  }
  if (f.shared) s.shared_down = SearchDown(SiluProduct(input.rows.data(), tokens, w.shared, pool), tokens, *f.shared, group, grid, pool);
  return s;
}

void ApplyMoeMlpScales(const MoeMlpScales& s, FloatMoeMlp& f) {
  const std::vector<float>& in = s.gate_up.scales;
  auto apply = [&in](FloatMlp& m, const ScaleSearchResult& down) {
    m.gate.ScaleColumns(in);
    m.up.ScaleColumns(in);
    m.up.DivideRows(down.scales);
    m.down.ScaleColumns(down.scales);
  };
  for (size_t e = 0; e < f.experts.size(); ++e) apply(f.experts[e], s.down[e]);
  if (f.shared) apply(*f.shared, *s.shared_down);
  const int64_t h = static_cast<int64_t>(in.size());
  for (size_t r = 0; r < f.router.size(); ++r) f.router[r] *= in[r % static_cast<size_t>(h)];
}

}  // namespace ernie::quantize
