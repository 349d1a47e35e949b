// AWQ on a MoE block (tools/quantize/moe_awq.h), on a test checkpoint's real
// calibration activations: the search never does worse than RTN, an expert
// no token reached stays RTN, and the scales folded into the weights, the
// router and the norm's output leave the block's float output and routing
// as they were (only the int4 rounding that follows may move them).
#include "tools/quantize/moe_awq.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/backend/cpu/moe_block.h"
#include "tools/quantize/calibration.h"

namespace ernie::quantize {
namespace {

// MoE layers 1.. with 16 experts of width 32, top 4, one shared expert, hidden 64.
const std::string kMoe = std::string(ERNIE_TEST_DATA_DIR) + "/moe_reference/moe_e16_k4_shared1_bf16";
// Layers 0 and 2 MoE: 6 experts, all chosen (top 6), two shared, hidden 48, width 24, float32.
const std::string kMoeAllChosen = std::string(ERNIE_TEST_DATA_DIR) + "/moe_reference/moe_e6_k6_shared2_interval2_f32";

std::vector<int32_t> Tokens(int n, int vocab) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(3 + (i * 53 + i * i * 7) % (vocab - 3));
  return t;
}

// A float32 view of `values` named like `like`, shaped [rows, cols].
TensorView F32View(const std::vector<float>& values, const std::string& name, std::vector<int64_t> shape) {
  TensorView v;
  v.name = name;
  v.dtype = DType::kF32;
  v.shape = std::move(shape);
  v.bytes = std::span(reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float));
  return v;
}

// Views of a scaled block's float weights, as a MoeLayerWeights the CPU MoE
// block runs (the correction bias is the checkpoint's).
struct ScaledBlockViews {
  std::vector<TensorView> views;  // stable: reserved up front
  MoeLayerWeights weights;

  ScaledBlockViews(const FloatMoeMlp& f, const MoeLayerWeights& original) {
    views.reserve(1 + 6 * (f.experts.size() + 1));
    const int64_t e = static_cast<int64_t>(f.experts.size());
    weights.router = Add(f.router, "router", {e, static_cast<int64_t>(f.router.size()) / e});
    weights.correction_bias = original.correction_bias;
    for (const FloatMlp& m : f.experts) weights.experts.push_back(Mlp(m));
    weights.has_shared = f.shared.has_value();
    if (f.shared) weights.shared = Mlp(*f.shared);
  }
  const TensorView* Add(const std::vector<float>& v, const std::string& name, std::vector<int64_t> shape) {
    views.push_back(F32View(v, name, std::move(shape)));
    return &views.back();
  }
  LinearWeights Linear(const FloatLinear& f) {
    LinearWeights l;
    l.weight = Add(f.w, f.lin->weight->name, {f.out(), f.in()});
    if (!f.bias.empty()) l.bias = Add(f.bias, f.lin->weight->name + ".bias", {f.out()});
    return l;
  }
  MlpWeights Mlp(const FloatMlp& m) { return {Linear(m.gate), Linear(m.up), Linear(m.down)}; }
};

struct Calibrated {
  std::unique_ptr<LoadedModel> model;
  std::vector<LayerActivations> acts;
};

Calibrated Calibrate(const std::string& dir, int tokens) {
  auto model = LoadModel(dir);
  EXPECT_TRUE(model.ok()) << model.status();
  auto acts = CollectActivations(**model, Tokens(tokens, static_cast<int>((*model)->config.vocab_size)), 2);
  EXPECT_TRUE(acts.ok()) << acts.status();
  return {std::move(*model), std::move(*acts)};
}

void ExpectScalesKeepTheBlock(const std::string& dir, int tokens, int64_t group) {
  const Calibrated c = Calibrate(dir, tokens);
  const ModelConfig& config = c.model->config;
  ThreadPool pool(2);
  int moe_layers = 0;
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    const Ernie45LayerWeights& l = c.model->weights.layers[static_cast<size_t>(layer)];
    if (!l.is_moe) continue;
    ++moe_layers;
    SCOPED_TRACE(::testing::Message() << dir << " layer " << layer);
    const GroupActivations& input = c.acts[static_cast<size_t>(layer)][static_cast<size_t>(cpu::LinearInput::kGateUp)];
    ASSERT_EQ(input.num_rows(), tokens) << "the calibration run reports a MoE block's input";
    FloatMoeMlp f = LoadFloatMoeMlp(l.moe);
    const MoeMlpScales s = SearchMoeMlpScales(config, l.moe, input, f, group, 10, pool);

    // The search: never above RTN; every routed row counted once.
    EXPECT_LE(s.gate_up.loss, s.gate_up.rtn_loss);
    ASSERT_EQ(s.down.size(), l.moe.experts.size());
    EXPECT_EQ(std::accumulate(s.routed_rows.begin(), s.routed_rows.end(), int64_t{0}), tokens * config.moe.top_k);
    for (size_t e = 0; e < s.down.size(); ++e) {
      EXPECT_LE(s.down[e].loss, s.down[e].rtn_loss) << "expert " << e;
      if (s.routed_rows[e] == 0) {
        EXPECT_EQ(s.down[e].alpha, 0.0);
        EXPECT_EQ(s.down[e].scales, std::vector<float>(static_cast<size_t>(f.experts[e].down.in()), 1.0f));
      }
    }
    ASSERT_EQ(s.shared_down.has_value(), l.moe.has_shared);
    if (s.shared_down) {
      EXPECT_LE(s.shared_down->loss, s.shared_down->rtn_loss);
    }
    bool scaled = s.gate_up.alpha > 0;
    for (const ScaleSearchResult& d : s.down) scaled = scaled || d.alpha > 0;
    EXPECT_TRUE(scaled) << "random weights and real activations should pick some alpha above 0";

    // The fold: the block on x / s with the scaled weights is the block on x.
    ApplyMoeMlpScales(s, f);
    const ScaledBlockViews views(f, l.moe);
    const int64_t h = input.cols;
    std::vector<float> x_over_s = input.rows;
    for (size_t k = 0; k < x_over_s.size(); ++k) x_over_s[k] /= s.gate_up.scales[k % static_cast<size_t>(h)];
    cpu::MoeWorkspace ws_want, ws_got;
    std::vector<float> want(input.rows.size()), got(input.rows.size());
    cpu::MoeMlp(input.rows.data(), tokens, config, l.moe, ws_want, want.data(), pool);
    cpu::MoeMlp(x_over_s.data(), tokens, config, views.weights, ws_got, got.data(), pool);
    EXPECT_EQ(ws_got.routing.experts, ws_want.routing.experts) << "the scaled router routes every token the same";
    double max_abs = 0, max_diff = 0;
    for (size_t k = 0; k < want.size(); ++k) {
      max_abs = std::max(max_abs, static_cast<double>(std::abs(want[k])));
      max_diff = std::max(max_diff, static_cast<double>(std::abs(got[k] - want[k])));
    }
    EXPECT_LT(max_diff, 1e-4 * std::max(1.0, max_abs)) << "block output up to " << max_abs;
  }
  EXPECT_GT(moe_layers, 0);
}

TEST(MoeAwqTest, ScalesLeaveTheBlockAsItWas) { ExpectScalesKeepTheBlock(kMoe, 48, 32); }

TEST(MoeAwqTest, EveryExpertChosenAndTwoSharedExperts) { ExpectScalesKeepTheBlock(kMoeAllChosen, 24, 8); }

TEST(MoeAwqTest, AnExpertNoTokenReachesKeepsRoundToNearest) {
  // Two calibration tokens reach at most 8 of the 16 experts.
  const Calibrated c = Calibrate(kMoe, 2);
  ThreadPool pool(1);
  for (int64_t layer = 0; layer < c.model->config.num_layers; ++layer) {
    const Ernie45LayerWeights& l = c.model->weights.layers[static_cast<size_t>(layer)];
    if (!l.is_moe) continue;
    const FloatMoeMlp f = LoadFloatMoeMlp(l.moe);
    const MoeMlpScales s = SearchMoeMlpScales(c.model->config, l.moe,
                                              c.acts[static_cast<size_t>(layer)][static_cast<size_t>(cpu::LinearInput::kGateUp)],
                                              f, 32, 5, pool);
    const auto unrouted = std::count(s.routed_rows.begin(), s.routed_rows.end(), int64_t{0});
    EXPECT_GE(unrouted, 8);
    for (size_t e = 0; e < s.down.size(); ++e)
      if (s.routed_rows[e] == 0) {
        EXPECT_EQ(s.down[e].alpha, 0.0);
        EXPECT_EQ(s.down[e].loss, 0.0);
      }
  }
}

}  // namespace
}  // namespace ernie::quantize
