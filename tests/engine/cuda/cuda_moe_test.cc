// The MoE pieces of the CUDA backend that the teacher-forced parity test
// (cuda_backend_parity_test, moe_reference checkpoints) does not pin down
// on its own:
// - the routing kernels choose the same experts with the same weights as
//   the CPU reference's rule (biased choice, unbiased renormalised weights,
//   ties to the smaller id), including forced ties;
// - the alignment gives every assignment its own slot inside a tile of its
//   expert, pads with -1 and counts the tiles, for all four tile sizes and
//   for a routing that sends every token to one expert;
// - the grouped expert kernels (GEMV and tiled GEMM) equal per-expert
//   products computed here;
// - --load-format dummy builds the same shapes as the checkpoint (same
//   weight bytes), deterministically, and the CPU backend refuses it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/kernels/grouped_expert_gemm.h"
#include "engine/backend/cuda/kernels/grouped_expert_gemv.h"
#include "engine/backend/cuda/kernels/moe_routing.h"
#include "engine/util/half.h"
#include "tests/engine/cuda/backend_runner.h"
#include "tests/engine/cuda/device_copies.h"
#include "tests/engine/cuda/dummy_backends.h"
#include "tests/engine/cuda/moe_alignment.h"

namespace ernie::testing {
namespace {

using cuda::DeviceBuffer;

// The CPU reference's routing rule on the logits of one token: the
// probabilities, the biased scores and the top_k ids in order.
struct Routed {
  std::vector<double> p, score;
  std::vector<int32_t> ids;
};
Routed ReferenceRoute(const std::vector<double>& logits, const std::vector<float>& bias, int k) {
  const int e = static_cast<int>(logits.size());
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  Routed r{std::vector<double>(e), std::vector<double>(e), std::vector<int32_t>(e)};
  double sum = 0;
  for (int i = 0; i < e; ++i) sum += r.p[i] = std::exp(logits[i] - max_logit);
  for (int i = 0; i < e; ++i) r.score[i] = (r.p[i] /= sum) + bias[i];
  std::iota(r.ids.begin(), r.ids.end(), 0);
  std::stable_sort(r.ids.begin(), r.ids.end(), [&](int a, int b) { return r.score[a] > r.score[b]; });
  r.ids.resize(k);
  return r;
}

TEST(CudaMoeRoutingTest, ChoosesAndWeighsLikeTheCpuRule) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const float eps = 1e-5f;
  for (const auto [tokens, hidden, experts, k, shared] :
       {std::array{1, 64, 8, 2, 0}, std::array{37, 1100, 64, 6, 2}, std::array{9, 32, 5, 5, 1},
        std::array{300, 256, 160, 8, 0}}) {
    SCOPED_TRACE(::testing::Message() << tokens << " tokens, " << experts << " experts, top " << k << ", "
                                      << shared << " shared");
    const int choices = k + shared;
    std::vector<float> x(static_cast<size_t>(tokens * hidden)), norm(static_cast<size_t>(hidden));
    for (auto& v : x) v = 3.0f * dist(gen);
    for (auto& v : norm) v = 1.0f + 0.2f * dist(gen);
    std::vector<float> router(static_cast<size_t>(experts * hidden)), bias(static_cast<size_t>(experts));
    for (auto& v : router) v = 0.05f * dist(gen);
    for (auto& v : bias) v = 0.01f * dist(gen);
    // Experts 0 and 1 identical with the same bias: a forced tie, which the smaller id wins.
    std::copy_n(router.begin(), hidden, router.begin() + hidden);
    bias[1] = bias[0];
    auto d_x = Upload(x);
    auto d_norm = Upload(norm);
    auto d_router = Upload(router);
    auto d_bias = Upload(bias);
    auto d_logits = Zeros<float>(static_cast<size_t>(tokens * experts));
    auto d_ids = Zeros<int32_t>(static_cast<size_t>(tokens * choices));
    auto d_weights = Zeros<float>(static_cast<size_t>(tokens * choices));
    ASSERT_EQ(cuda::LaunchMoeRoute({.x = d_x.data(),
                                    .norm_weight = d_norm.data(),
                                    .eps = eps,
                                    .router = d_router.data(),
                                    .correction_bias = d_bias.data(),
                                    .logits = d_logits.data(),
                                    .topk_ids = d_ids.data(),
                                    .topk_weights = d_weights.data(),
                                    .tokens = tokens,
                                    .hidden = hidden,
                                    .experts = experts,
                                    .top_k = k,
                                    .shared_experts = shared,
                                    .norm_min = 1e-12f},
                                   nullptr),
              cudaSuccess);
    const auto ids = Download(d_ids);
    const auto weights = Download(d_weights);
    for (int t = 0; t < tokens; ++t) {
      double square = 0;
      for (int i = 0; i < hidden; ++i) square += static_cast<double>(x[t * hidden + i]) * x[t * hidden + i];
      const double inv_rms = 1.0 / std::sqrt(square / hidden + eps);
      std::vector<double> logits(static_cast<size_t>(experts));
      for (int e = 0; e < experts; ++e)
        for (int i = 0; i < hidden; ++i)
          logits[e] += x[t * hidden + i] * inv_rms * norm[i] * static_cast<double>(router[e * hidden + i]);
      const Routed want = ReferenceRoute(logits, bias, k);
      // Choice j has the j-th best score; scores within float32 rounding
      // of each other may come in either order.
      const int32_t* row = ids.data() + t * choices;
      double chosen = 0;
      for (int j = 0; j < k; ++j) chosen += want.p[row[j]];
      for (int j = 0; j < k; ++j) {
        ASSERT_TRUE(row[j] >= 0 && row[j] < experts) << "token " << t;
        EXPECT_NEAR(want.score[row[j]], want.score[want.ids[j]], 1e-6) << "token " << t << " choice " << j;
        EXPECT_NEAR(weights[t * choices + j], want.p[row[j]] / chosen, 1e-5) << "token " << t << " choice " << j;
      }
      // Then the shared experts, ids experts.., weight 1.
      for (int s = 0; s < shared; ++s) {
        EXPECT_EQ(row[k + s], experts + s) << "token " << t;
        EXPECT_EQ(weights[t * choices + k + s], 1.0f) << "token " << t;
      }
      // Expert 1 ties expert 0 exactly; where either is chosen, 0 comes first.
      const auto at0 = std::find(row, row + k, 0), at1 = std::find(row, row + k, 1);
      if (at1 != row + k) {
        EXPECT_LT(at0, at1) << "token " << t;
      }
      EXPECT_EQ(std::set<int32_t>(row, row + k).size(), static_cast<size_t>(k)) << "token " << t << ": a repeat";
    }
  }
}

// LaunchMoeRouteAndAlign (one launch for steps of up to
// kMoeFusedTopKMaxTokens, the last CTA running the top-k and alignment; the
// normalised rows written by the router) gives the separate launches'
// choices and weights bit for bit, an alignment with the same tiles and
// every assignment in a slot of its expert, and the RMSNorm rows within
// bf16 rounding. It is launched twice, the second time on cleared outputs,
// as a graph replays it: the first launch must leave its arrival count at
// zero for the second to finish the routing.
TEST(CudaMoeRoutingTest, FusedRouteAndAlignMatchesTheSeparateLaunches) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(17);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int hidden = 320, experts = 64, k = 6, shared = 2, tile_rows = 16;
  const int choices = k + shared, stacked = experts + shared;
  for (const int tokens : {1, 3, 12, cuda::kMoeFusedTopKMaxTokens, cuda::kMoeFusedTopKMaxTokens + 1, 200}) {
    SCOPED_TRACE(::testing::Message() << tokens << " tokens");
    std::vector<float> x(static_cast<size_t>(tokens * hidden)), norm(hidden), router(experts * hidden), bias(experts);
    for (auto& v : x) v = 3.0f * dist(gen);
    for (auto& v : norm) v = 1.0f + 0.2f * dist(gen);
    for (auto& v : router) v = 0.05f * dist(gen);
    for (auto& v : bias) v = 0.01f * dist(gen);
    auto d_x = Upload(x);
    auto d_norm = Upload(norm);
    auto d_router = Upload(router);
    auto d_bias = Upload(bias);
    const int assignments = tokens * choices;
    const int64_t slots = cuda::MoeSlotCapacity(assignments, stacked, tile_rows);
    struct Outputs {
      DeviceBuffer<float> logits, weights;
      DeviceBuffer<int32_t> ids, slot_token, slot_of, tile_expert, tiles;
      DeviceBuffer<uint16_t> normed;
      DeviceBuffer<uint32_t> arrivals;
    };
    auto outputs = [&] {
      return Outputs{Zeros<float>(static_cast<size_t>(tokens * experts)), Zeros<float>(assignments),
                     Zeros<int32_t>(assignments),                          Zeros<int32_t>(slots),
                     Zeros<int32_t>(assignments),                          Zeros<int32_t>(slots / tile_rows),
                     Zeros<int32_t>(1),                                    Zeros<uint16_t>(x.size()),
                     Zeros<uint32_t>(1)};
    };
    Outputs separate = outputs(), fused = outputs();
    auto route = [&](Outputs& o, bool write_normed) {
      return cuda::MoeRouteParams{.x = d_x.data(),
                                  .norm_weight = d_norm.data(),
                                  .eps = 1e-5f,
                                  .router = d_router.data(),
                                  .correction_bias = d_bias.data(),
                                  .logits = o.logits.data(),
                                  .normed = write_normed ? reinterpret_cast<__nv_bfloat16*>(o.normed.data()) : nullptr,
                                  .topk_ids = o.ids.data(),
                                  .topk_weights = o.weights.data(),
                                  .tokens = tokens,
                                  .hidden = hidden,
                                  .experts = experts,
                                  .top_k = k,
                                  .shared_experts = shared};
    };
    auto align = [&](Outputs& o) {
      return cuda::MoeAlignParams{.topk_ids = o.ids.data(),
                                  .assignments = assignments,
                                  .top_k = choices,
                                  .experts = stacked,
                                  .tile_rows = tile_rows,
                                  .slot_token = o.slot_token.data(),
                                  .slot_of = o.slot_of.data(),
                                  .tile_expert = o.tile_expert.data(),
                                  .num_tiles = o.tiles.data(),
                                  .arrivals = o.arrivals.data()};
    };
    ASSERT_EQ(cuda::LaunchMoeRoute(route(separate, false), nullptr), cudaSuccess);
    ASSERT_EQ(cuda::LaunchMoeAlign(align(separate), nullptr), cudaSuccess);
    ASSERT_EQ(cuda::LaunchMoeRouteAndAlign(route(fused, true), align(fused), nullptr, false), cudaSuccess);
    fused.ids = Zeros<int32_t>(assignments);
    fused.weights = Zeros<float>(assignments);
    fused.tiles = Zeros<int32_t>(1);
    fused.slot_of = Zeros<int32_t>(assignments);
    ASSERT_EQ(cuda::LaunchMoeRouteAndAlign(route(fused, true), align(fused), nullptr, false), cudaSuccess);
    EXPECT_EQ(Download(fused.arrivals), std::vector<uint32_t>{0});
    if (tokens <= cuda::kMoeFusedTopKMaxTokens) {
      auto uncounted = align(fused);
      uncounted.arrivals = nullptr;
      EXPECT_EQ(cuda::LaunchMoeRouteAndAlign(route(fused, true), uncounted, nullptr), cudaErrorInvalidValue);
    }
    auto mismatched = align(fused);
    mismatched.top_k = k;  // the shared experts forgotten
    EXPECT_EQ(cuda::LaunchMoeRouteAndAlign(route(fused, true), mismatched, nullptr), cudaErrorInvalidValue);
    const auto ids = Download(fused.ids);
    EXPECT_EQ(ids, Download(separate.ids));
    EXPECT_EQ(Download(fused.weights), Download(separate.weights));
    const auto tiles = Download(fused.tiles);
    ASSERT_EQ(tiles, Download(separate.tiles));
    const auto tile_expert = Download(fused.tile_expert);
    const auto want_tile_expert = Download(separate.tile_expert);
    ASSERT_TRUE(std::equal(tile_expert.begin(), tile_expert.begin() + tiles[0], want_tile_expert.begin()));
    const auto slot_of = Download(fused.slot_of);
    const auto slot_token = Download(fused.slot_token);
    std::set<int32_t> used;
    for (int i = 0; i < assignments; ++i) {
      ASSERT_LT(slot_of[i], tiles[0] * tile_rows) << "assignment " << i;
      EXPECT_EQ(tile_expert[slot_of[i] / tile_rows], ids[i]) << "assignment " << i;
      EXPECT_EQ(slot_token[slot_of[i]], i / choices) << "assignment " << i;
      EXPECT_TRUE(used.insert(slot_of[i]).second) << "assignment " << i << " shares a slot";
    }
    const auto normed = Download(fused.normed);
    for (int t = 0; t < tokens; ++t) {
      double square = 0;
      for (int i = 0; i < hidden; ++i) square += static_cast<double>(x[t * hidden + i]) * x[t * hidden + i];
      const double inv_rms = 1.0 / std::sqrt(square / hidden + 1e-5);
      for (int i = 0; i < hidden; ++i) {
        const double want = norm[i] * (x[t * hidden + i] * inv_rms);
        ASSERT_NEAR(Bf16ToFloat(normed[t * hidden + i]), want, std::abs(want) / 128 + 1e-6)
            << "token " << t << " feature " << i;
      }
    }
    // One token: the cluster launch (the decode step at batch 1) leaves
    // every output as the last-CTA launch does, bit for bit.
    if (tokens == 1) {
      ASSERT_TRUE(cuda::MoeOneTokenClusterRuns()) << "Hopper runs the 16-CTA cluster";
      Outputs clustered = outputs();
      ASSERT_EQ(cuda::LaunchMoeRouteAndAlign(route(clustered, true), align(clustered), nullptr, true), cudaSuccess);
      EXPECT_EQ(Download(clustered.logits), Download(fused.logits));
      EXPECT_EQ(Download(clustered.ids), ids);
      EXPECT_EQ(Download(clustered.weights), Download(fused.weights));
      EXPECT_EQ(Download(clustered.tiles), tiles);
      EXPECT_EQ(Download(clustered.tile_expert), tile_expert);
      EXPECT_EQ(Download(clustered.slot_of), slot_of);
      EXPECT_EQ(Download(clustered.slot_token), slot_token);
      EXPECT_EQ(Download(clustered.normed), normed);
      EXPECT_EQ(Download(clustered.arrivals), std::vector<uint32_t>{0}) << "the cluster counts no arrivals";
    }
  }
}

// The one-token cluster launch against the last-CTA launch over the shapes
// its one-warp top-k and alignment must handle: fewer experts than a warp's
// lanes, experts that leave CTAs of the cluster without work, top-k from 1
// to 8, shared experts or none, tiles of 8 and 64 slots, and forced ties
// (identical router rows and biases, which the smaller id wins): every
// output bit for bit.
TEST(CudaMoeRoutingTest, OneTokenClusterMatchesTheLastCtaLaunch) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  ASSERT_TRUE(cuda::MoeOneTokenClusterRuns()) << "Hopper runs the 16-CTA cluster";
  std::mt19937 gen(23);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  struct Case {
    int hidden, experts, top_k, shared, tile_rows;
  };
  for (const Case c : {Case{64, 8, 1, 0, 8}, Case{320, 20, 6, 2, 64}, Case{2560, 64, 6, 2, 8}, Case{128, 40, 8, 1, 16},
                       Case{96, 33, 3, 0, 32}}) {
    SCOPED_TRACE(::testing::Message() << "hidden " << c.hidden << ", " << c.experts << " experts, top " << c.top_k
                                      << ", " << c.shared << " shared, tiles of " << c.tile_rows);
    std::vector<float> x(c.hidden), norm(c.hidden), router(static_cast<size_t>(c.experts) * c.hidden), bias(c.experts);
    for (auto& v : x) v = 3.0f * dist(gen);
    for (auto& v : norm) v = 1.0f + 0.2f * dist(gen);
    for (auto& v : router) v = 0.05f * dist(gen);
    for (auto& v : bias) v = 0.01f * dist(gen);
    // Ties: the last expert copies the first, and the two middle ones copy each other.
    std::copy_n(router.begin(), c.hidden, router.end() - c.hidden);
    bias[c.experts - 1] = bias[0];
    const int mid = c.experts / 2;
    std::copy_n(router.begin() + (mid - 1) * c.hidden, c.hidden, router.begin() + mid * c.hidden);
    bias[mid] = bias[mid - 1];
    auto d_x = Upload(x);
    auto d_norm = Upload(norm);
    auto d_router = Upload(router);
    auto d_bias = Upload(bias);
    const int choices = c.top_k + c.shared, stacked = c.experts + c.shared;
    const int64_t slots = cuda::MoeSlotCapacity(choices, stacked, c.tile_rows);
    struct Outputs {
      DeviceBuffer<float> logits = Zeros<float>(1), weights = Zeros<float>(1);
      DeviceBuffer<int32_t> ids = Zeros<int32_t>(1), slot_token = Zeros<int32_t>(1), slot_of = Zeros<int32_t>(1),
                            tile_expert = Zeros<int32_t>(1), tiles = Zeros<int32_t>(1);
      DeviceBuffer<uint16_t> normed = Zeros<uint16_t>(1);
      DeviceBuffer<uint32_t> arrivals = Zeros<uint32_t>(1);
    };
    auto run = [&](bool cluster, Outputs& o) {
      o.logits = Zeros<float>(c.experts);
      o.weights = Zeros<float>(choices);
      o.ids = Zeros<int32_t>(choices);
      o.slot_token = Zeros<int32_t>(slots);
      o.slot_of = Zeros<int32_t>(choices);
      o.tile_expert = Zeros<int32_t>(slots / c.tile_rows);
      o.normed = Zeros<uint16_t>(c.hidden);
      return cuda::LaunchMoeRouteAndAlign({.x = d_x.data(),
                                           .norm_weight = d_norm.data(),
                                           .eps = 1e-5f,
                                           .router = d_router.data(),
                                           .correction_bias = d_bias.data(),
                                           .logits = o.logits.data(),
                                           .normed = reinterpret_cast<__nv_bfloat16*>(o.normed.data()),
                                           .topk_ids = o.ids.data(),
                                           .topk_weights = o.weights.data(),
                                           .tokens = 1,
                                           .hidden = c.hidden,
                                           .experts = c.experts,
                                           .top_k = c.top_k,
                                           .shared_experts = c.shared},
                                          {.topk_ids = o.ids.data(),
                                           .assignments = choices,
                                           .top_k = choices,
                                           .experts = stacked,
                                           .tile_rows = c.tile_rows,
                                           .slot_token = o.slot_token.data(),
                                           .slot_of = o.slot_of.data(),
                                           .tile_expert = o.tile_expert.data(),
                                           .num_tiles = o.tiles.data(),
                                           .arrivals = o.arrivals.data()},
                                          nullptr, cluster);
    };
    Outputs last_cta, clustered;
    ASSERT_EQ(run(false, last_cta), cudaSuccess);
    ASSERT_EQ(run(true, clustered), cudaSuccess);
    EXPECT_EQ(Download(clustered.logits), Download(last_cta.logits));
    EXPECT_EQ(Download(clustered.ids), Download(last_cta.ids));
    EXPECT_EQ(Download(clustered.weights), Download(last_cta.weights));
    EXPECT_EQ(Download(clustered.tiles), Download(last_cta.tiles));
    EXPECT_EQ(Download(clustered.tile_expert), Download(last_cta.tile_expert));
    EXPECT_EQ(Download(clustered.slot_of), Download(last_cta.slot_of));
    EXPECT_EQ(Download(clustered.slot_token), Download(last_cta.slot_token));
    EXPECT_EQ(Download(clustered.normed), Download(last_cta.normed));
    // The forced ties: where both of a pair are chosen, the smaller id comes first.
    const auto ids = Download(clustered.ids);
    const auto first = std::find(ids.begin(), ids.begin() + c.top_k, 0);
    const auto last = std::find(ids.begin(), ids.begin() + c.top_k, c.experts - 1);
    if (first != ids.begin() + c.top_k && last != ids.begin() + c.top_k) {
      EXPECT_LT(first, last);
    }
  }
}

// Runs the alignment of `ids` and checks its invariants.
void CheckAlignment(const std::vector<int32_t>& ids, int top_k, int experts, int tile_rows) {
  SCOPED_TRACE(::testing::Message() << ids.size() << " assignments, " << experts << " experts, tiles of " << tile_rows);
  const auto assignments = static_cast<int32_t>(ids.size());
  DeviceAlignment aligned;
  ASSERT_NO_FATAL_FAILURE(AlignOnDevice(ids, top_k, experts, tile_rows, &aligned));
  const auto slot_token = Download(aligned.slot_token);
  const auto slot_of = Download(aligned.slot_of);
  const auto tile_expert = Download(aligned.tile_expert);
  const int32_t tiles = Download(aligned.tiles)[0];
  std::vector<int> count(static_cast<size_t>(experts));
  for (int32_t e : ids) ++count[e];
  int want_tiles = 0;
  for (int c : count) want_tiles += (c + tile_rows - 1) / tile_rows;
  ASSERT_EQ(tiles, want_tiles);
  std::set<int32_t> used;
  for (int32_t i = 0; i < assignments; ++i) {
    const int32_t slot = slot_of[i];
    ASSERT_GE(slot, 0);
    ASSERT_LT(slot, tiles * tile_rows);
    EXPECT_TRUE(used.insert(slot).second) << "slot " << slot << " given twice";
    EXPECT_EQ(slot_token[slot], i / top_k);
    EXPECT_EQ(tile_expert[slot / tile_rows], ids[i]) << "assignment " << i;
  }
  for (int32_t s = 0; s < tiles * tile_rows; ++s)
    if (!used.count(s)) {
      EXPECT_EQ(slot_token[s], -1) << "padding slot " << s;
    }
}

// Refusals are checked before any CUDA call, so this runs without a device
// too. (A null input once passed: the check returned an error code from a
// bool function, which read as "valid".)
TEST(CudaMoeRoutingTest, RejectsBadParameters) {
  alignas(16) static float data[256] = {};
  alignas(16) static int32_t ints[256] = {};
  alignas(16) static uint16_t normed[64] = {};
  static uint32_t arrivals = 0;
  const cuda::MoeRouteParams route{.x = data,
                                   .norm_weight = data,
                                   .router = data,
                                   .correction_bias = data,
                                   .logits = data,
                                   .topk_ids = ints,
                                   .topk_weights = data,
                                   .tokens = 1,
                                   .hidden = 8,
                                   .experts = 4,
                                   .top_k = 2};
  const cuda::MoeAlignParams align{.topk_ids = ints,
                                   .assignments = 2,
                                   .top_k = 2,
                                   .experts = 4,
                                   .tile_rows = 8,
                                   .slot_token = ints,
                                   .slot_of = ints,
                                   .tile_expert = ints,
                                   .num_tiles = ints,
                                   .arrivals = &arrivals};
  auto bad_route = [&](auto edit) {
    cuda::MoeRouteParams p = route;
    edit(p);
    return std::pair(cuda::LaunchMoeRoute(p, nullptr), cuda::LaunchMoeRouteAndAlign(p, align, nullptr));
  };
  const auto refused = std::pair(cudaErrorInvalidValue, cudaErrorInvalidValue);
  EXPECT_EQ(bad_route([](auto& p) { p.x = nullptr; }), refused);
  EXPECT_EQ(bad_route([](auto& p) { p.logits = nullptr; }), refused);
  EXPECT_EQ(bad_route([](auto& p) { p.router = data + 1; }), refused);  // read as float4s
  EXPECT_EQ(bad_route([](auto& p) { p.normed = reinterpret_cast<__nv_bfloat16*>(normed + 1); }), refused);
  EXPECT_EQ(bad_route([](auto& p) { p.hidden = 6; }), refused);
  EXPECT_EQ(bad_route([](auto& p) { p.top_k = 5; }), refused);  // more than the experts
  EXPECT_EQ(bad_route([](auto& p) { p.tokens = 0; }), refused);
  auto bad_align = [&](auto edit) {
    cuda::MoeAlignParams a = align;
    edit(a);
    return cuda::LaunchMoeRouteAndAlign(route, a, nullptr);
  };
  EXPECT_EQ(bad_align([](auto& a) { a.arrivals = nullptr; }), cudaErrorInvalidValue);  // one launch needs the count
  EXPECT_EQ(bad_align([](auto& a) { a.experts = 5; }), cudaErrorInvalidValue);  // not route's experts + shared
  EXPECT_EQ(bad_align([](auto& a) { a.tile_rows = 12; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad_align([](auto& a) { a.num_tiles = nullptr; }), cudaErrorInvalidValue);
}

TEST(CudaMoeAlignTest, EveryAssignmentGetsOneSlotInATileOfItsExpert) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(3);
  for (int tile_rows : {8, 16, 32, 64}) {
    for (const auto [tokens, k, experts] : {std::array{1, 6, 64}, std::array{256, 6, 64}, std::array{1000, 2, 8},
                                            std::array{5, 3, 1000}}) {
      std::vector<int32_t> ids;
      for (int t = 0; t < tokens; ++t) {
        std::vector<int32_t> all(static_cast<size_t>(experts));
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), gen);
        ids.insert(ids.end(), all.begin(), all.begin() + k);
      }
      CheckAlignment(ids, k, experts, tile_rows);
    }
    // Every token to expert 5 (top 1): one expert's run spans many tiles.
    CheckAlignment(std::vector<int32_t>(777, 5), 1, 16, tile_rows);
  }
}

// Both grouped kernels take the same parameters (the GEMM runs a tile of 8
// slots as half of a 16-row mma tile).
// The combine: out[t] (+)= sum_j weight[t, j] * expert_out[slot_of[t, j]],
// summed over the choices in order, for several tokens, a hidden size that
// is not a multiple of the CTA's span, and both output modes.
TEST(CudaMoeCombineTest, SumsEachTokensWeightedSlots) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(23);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int tokens = 5, hidden = 1100, top_k = 8, slots = 48;
  std::vector<float> expert_out(static_cast<size_t>(slots) * hidden), weights(tokens * top_k),
      residual(static_cast<size_t>(tokens) * hidden);
  for (auto& v : expert_out) v = dist(gen);
  for (auto& v : weights) v = dist(gen);
  for (auto& v : residual) v = dist(gen);
  std::vector<int32_t> slot_of(tokens * top_k);
  for (auto& s : slot_of) s = static_cast<int32_t>(gen() % slots);
  auto d_expert_out = Upload(expert_out);
  auto d_weights = Upload(weights);
  auto d_slot_of = Upload(slot_of);
  for (const bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulate" : "overwrite");
    auto d_out = Upload(residual);
    ASSERT_EQ(cuda::LaunchMoeCombine({.expert_out = d_expert_out.data(),
                                      .slot_of = d_slot_of.data(),
                                      .topk_weights = d_weights.data(),
                                      .out = d_out.data(),
                                      .accumulate = accumulate,
                                      .tokens = tokens,
                                      .hidden = hidden,
                                      .top_k = top_k},
                                     nullptr),
              cudaSuccess);
    const auto out = Download(d_out);
    for (int t = 0; t < tokens; ++t)
      for (int i = 0; i < hidden; ++i) {
        float want = 0.0f;
        for (int j = 0; j < top_k; ++j)
          want += weights[t * top_k + j] * expert_out[static_cast<size_t>(slot_of[t * top_k + j]) * hidden + i];
        if (accumulate) want += residual[static_cast<size_t>(t) * hidden + i];
        ASSERT_NEAR(out[static_cast<size_t>(t) * hidden + i], want, 1e-5f) << "token " << t << " column " << i;
      }
  }
}

TEST(CudaMoeCombineTest, RejectsBadParameters) {
  // Checked before any CUDA call, so this runs without a device too.
  alignas(16) static float data[64] = {};
  static int32_t slots[8] = {};
  const cuda::MoeCombineParams ok{
      .expert_out = data, .slot_of = slots, .topk_weights = data, .out = data, .tokens = 1, .hidden = 8, .top_k = 2};
  auto bad = [&](auto edit) {
    cuda::MoeCombineParams p = ok;
    edit(p);
    return cuda::LaunchMoeCombine(p, nullptr);
  };
  EXPECT_EQ(bad([](auto& p) { p.hidden = 6; }), cudaErrorInvalidValue);  // float4 columns
  EXPECT_EQ(bad([](auto& p) { p.top_k = cuda::kMoeMaxTopK + 1; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.out = data + 1; }), cudaErrorInvalidValue);  // 4-byte aligned only
  EXPECT_EQ(bad([](auto& p) { p.slot_of = nullptr; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.tokens = 0; }), cudaErrorInvalidValue);
}

TEST(CudaGroupedExpertGemvTest, EachTileUsesItsExpertsWeights) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int experts = 5, top_k = 2;
  // (n, k, tokens): a partial k block of both kernels, n under one CTA of
  // either; then several k blocks, n over several CTAs with a partial one
  // (160 = 128 + 32); then enough tokens that experts fill several tiles.
  for (const auto& [n, k, tokens] : {std::tuple{48, 136, 23}, std::tuple{160, 1032, 23}, std::tuple{48, 200, 90}})
    for (const bool gemm : {false, true})
      for (int tile_rows : {8, 16, 32, 64}) {
        for (const auto epilogue : {cuda::GroupedEpilogue::kStoreF32, cuda::GroupedEpilogue::kSiluMulBf16}) {
          SCOPED_TRACE(::testing::Message()
                       << (gemm ? "GEMM" : "GEMV") << ", n " << n << ", k " << k << ", tokens " << tokens
                       << ", tiles of " << tile_rows << ", epilogue " << static_cast<int>(epilogue));
          std::vector<uint16_t> x(tokens * k), w(experts * n * k);
          for (auto& v : x) v = FloatToBf16(dist(gen));
          for (auto& v : w) v = FloatToBf16(0.1f * dist(gen));
          std::vector<int32_t> ids;
          for (int t = 0; t < tokens; ++t) {
            ids.push_back(t % experts);
            ids.push_back((t * 3 + 1) % experts == t % experts ? (t + 1) % experts : (t * 3 + 1) % experts);
          }
          DeviceAlignment aligned;
          ASSERT_NO_FATAL_FAILURE(AlignOnDevice(ids, top_k, experts, tile_rows, &aligned));
          const int64_t slots = aligned.slots;
          auto d_x = Upload(x);
          auto d_w = Upload(w);
          const bool silu = epilogue == cuda::GroupedEpilogue::kSiluMulBf16;
          auto d_y32 = Zeros<float>(silu ? 1 : slots * n);
          auto d_y16 = Zeros<uint16_t>(silu ? slots * n / 2 : 1);
          const auto launch = gemm ? cuda::LaunchGroupedExpertGemm : cuda::LaunchGroupedExpertGemv;
          ASSERT_EQ(launch({.x = reinterpret_cast<const __nv_bfloat16*>(d_x.data()),
                            .x_row = aligned.slot_token.data(),
                            .w = reinterpret_cast<const __nv_bfloat16*>(d_w.data()),
                            .tile_expert = aligned.tile_expert.data(),
                            .num_tiles = aligned.tiles.data(),
                            .y = silu ? static_cast<void*>(d_y16.data()) : d_y32.data(),
                            .max_tiles = static_cast<int32_t>(slots / tile_rows),
                            .tile_rows = tile_rows,
                            .n = n,
                            .k = k,
                            .epilogue = epilogue},
                           nullptr),
                    cudaSuccess);
          const auto slot_of = Download(aligned.slot_of);
          const auto y32 = Download(d_y32);
          const auto y16 = Download(d_y16);
          for (int i = 0; i < tokens * top_k; ++i) {
            const int t = i / top_k, e = ids[i];
            std::vector<double> row(n);
            for (int r = 0; r < n; ++r)
              for (int j = 0; j < k; ++j)
                row[r] += static_cast<double>(Bf16ToFloat(x[t * k + j])) * Bf16ToFloat(w[(e * n + r) * k + j]);
            if (!silu) {
              for (int r = 0; r < n; ++r)
                ASSERT_NEAR(y32[slot_of[i] * n + r], row[r], 1e-4 * std::sqrt(k / 136.0)) << "assignment " << i;
              continue;
            }
            for (int f = 0; f < n / 2; ++f) {
              const double g = row[(f / 8) * 16 + f % 8], u = row[(f / 8) * 16 + f % 8 + 8];
              const double want = g / (1 + std::exp(-g)) * u;
              ASSERT_NEAR(Bf16ToFloat(y16[slot_of[i] * (n / 2) + f]), want, 1e-4 + std::abs(want) / 128)
                  << "assignment " << i << " feature " << f;
            }
          }
        }
      }
}

TEST(CudaGroupedExpertGemvTest, BothKernelsRejectBadParameters) {
  // Checked before any CUDA call, so this runs without a device too.
  alignas(16) static uint16_t data[64] = {};
  static int32_t ints[4] = {};
  const cuda::GroupedExpertGemvParams ok{.x = reinterpret_cast<const __nv_bfloat16*>(data),
                                         .w = reinterpret_cast<const __nv_bfloat16*>(data),
                                         .tile_expert = ints,
                                         .num_tiles = ints,
                                         .y = data,
                                         .max_tiles = 1,
                                         .n = 16,
                                         .k = 16};
  for (const auto launch : {cuda::LaunchGroupedExpertGemv, cuda::LaunchGroupedExpertGemm}) {
    auto bad = [&](auto edit) {
      cuda::GroupedExpertGemvParams p = ok;
      edit(p);
      return launch(p, nullptr);
    };
    EXPECT_EQ(bad([](auto& p) { p.x = nullptr; }), cudaErrorInvalidValue);
    EXPECT_EQ(bad([](auto& p) { p.k = 12; }), cudaErrorInvalidValue);  // not a multiple of 8
    EXPECT_EQ(bad([](auto& p) { p.tile_rows = 24; }), cudaErrorInvalidValue);
    EXPECT_EQ(bad([](auto& p) { p.max_tiles = 0; }), cudaErrorInvalidValue);
    EXPECT_EQ(bad([](auto& p) {
                p.n = 24;
                p.epilogue = cuda::GroupedEpilogue::kSiluMulBf16;
              }),
              cudaErrorInvalidValue);  // gate/up pairs need whole 16-row groups
  }
  // Only the GEMM waits for the kernel before it.
  cuda::GroupedExpertGemvParams dependent = ok;
  dependent.dependent = true;
  EXPECT_EQ(cuda::LaunchGroupedExpertGemv(dependent, nullptr), cudaErrorInvalidValue);
}

TEST(CudaDummyWeightsTest, SameShapesAsTheCheckpointAndDeterministic) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  const auto backends = MakeDummyAndCheckpointBackends(TestDataDir() + "/moe_reference/moe_e16_k4_shared1_bf16",
                                                       {.block_size = 16, .num_blocks = 8, .max_tokens_per_step = 64});
  ASSERT_TRUE(backends.ok());
  EXPECT_EQ(backends.a->memory().weights, backends.from_checkpoint->memory().weights);
  const std::vector<int32_t> tokens = {1, 5, 9, 200, 3, 77, 42};
  const auto table = ConsecutiveBlocks(static_cast<int64_t>(tokens.size()), 16);
  const auto la = TeacherForced(*backends.a, tokens, 0, 64, table);
  const auto lb = TeacherForced(*backends.b, tokens, 0, 64, table);
  ASSERT_EQ(la, lb);
  const auto real_logits = TeacherForced(*backends.from_checkpoint, tokens, 0, 64, table);
  EXPECT_NE(la, real_logits);
  for (float v : la) ASSERT_TRUE(std::isfinite(v));
  EXPECT_GT(*std::max_element(la.begin(), la.end()), *std::min_element(la.begin(), la.end()));
}

}  // namespace
}  // namespace ernie::testing
