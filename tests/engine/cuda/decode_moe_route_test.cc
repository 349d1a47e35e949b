// An AWQ o_proj that routes its one token (kernels/decode_linear.h
// DecodeMoeRoute) against the same o_proj without it followed by the
// routing launch MoeBlock runs otherwise (LaunchMoeRouteAndAlign, one
// token): the same residual bit for bit, the same choices, weights and
// tiles, and the logits and the normalised row to rounding (the same sums
// in another order). Each case launches twice (the arrival count must be
// left at zero for the next launch, as a replayed graph needs), over CTA
// shapes with partial row tiles, groups 32 - 128, 8 - 64 experts, top-k
// 1 - 8 and 0 - 2 shared experts. Bad parameters launch nothing.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/kernels/awq_decode_linear.h"
#include "engine/backend/cuda/kernels/decode_linear.h"
#include "engine/backend/cuda/kernels/moe_routing.h"
#include "engine/util/half.h"
#include "tests/engine/cuda/awq_test_case.h"
#include "tests/engine/cuda/backend_runner.h"
#include "tests/engine/cuda/device_awq_case.h"
#include "tests/engine/cuda/device_copies.h"

namespace ernie::testing {
namespace {

using cuda::DecodeEpilogue;
using cuda::DecodeLinearParams;
using cuda::DecodeMoeRoute;

struct Case {
  int32_t n, k, group, experts, top_k, shared;
};

std::vector<float> Uniform(size_t count, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

// One token's routing outputs, on the device.
struct Routed {
  Routed(const Case& c, int32_t tile_rows) {
    const int32_t choices = c.top_k + c.shared, stacked = c.experts + c.shared;
    const int64_t slots = cuda::MoeSlotCapacity(choices, stacked, tile_rows);
    y = Zeros<float>(static_cast<size_t>(c.n));
    normed = Zeros<uint16_t>(static_cast<size_t>(c.n));
    logits = Zeros<float>(static_cast<size_t>(c.experts));
    ids = Zeros<int32_t>(static_cast<size_t>(choices));
    weights = Zeros<float>(static_cast<size_t>(choices));
    slot_token = Zeros<int32_t>(static_cast<size_t>(slots));
    slot_of = Zeros<int32_t>(static_cast<size_t>(choices));
    tile_expert = Zeros<int32_t>(static_cast<size_t>(slots / tile_rows + 1));
    num_tiles = Zeros<int32_t>(1);
    arrivals = Zeros<uint32_t>(1);
    partials = Zeros<float>(static_cast<size_t>((c.n + 15) / 16 * cuda::DecodeMoeRoutePartialStride(c.experts)));
  }
  cuda::DeviceBuffer<float> y, logits, weights, partials;
  cuda::DeviceBuffer<uint16_t> normed;
  cuda::DeviceBuffer<int32_t> ids, slot_token, slot_of, tile_expert, num_tiles;
  cuda::DeviceBuffer<uint32_t> arrivals;
};

// The model's side of the routing: router, norm and bias.
struct Router {
  Router(const Case& c, std::mt19937& rng)
      : router(Upload(Uniform(static_cast<size_t>(c.experts) * c.n, -0.1f, 0.1f, rng))),
        norm(Upload(Uniform(static_cast<size_t>(c.n), 0.5f, 1.5f, rng))),
        bias(Upload(Uniform(static_cast<size_t>(c.experts), -0.02f, 0.02f, rng))) {}
  cuda::DeviceBuffer<float> router, norm, bias;
};

DecodeMoeRoute RouteOf(const Case& c, const Router& r, Routed& out, int32_t tile_rows) {
  const int32_t choices = c.top_k + c.shared;
  return {.route = {.x = out.y.data(),
                    .norm_weight = r.norm.data(),
                    .eps = 1e-5f,
                    .router = r.router.data(),
                    .correction_bias = r.bias.data(),
                    .logits = out.logits.data(),
                    .normed = reinterpret_cast<__nv_bfloat16*>(out.normed.data()),
                    .topk_ids = out.ids.data(),
                    .topk_weights = out.weights.data(),
                    .tokens = 1,
                    .hidden = c.n,
                    .experts = c.experts,
                    .top_k = c.top_k,
                    .shared_experts = c.shared,
                    .norm_min = 1e-12f},
          .align = {.topk_ids = out.ids.data(),
                    .assignments = choices,
                    .top_k = choices,
                    .experts = c.experts + c.shared,
                    .tile_rows = tile_rows,
                    .slot_token = out.slot_token.data(),
                    .slot_of = out.slot_of.data(),
                    .tile_expert = out.tile_expert.data(),
                    .num_tiles = out.num_tiles.data(),
                    .arrivals = out.arrivals.data()},
          .partials = out.partials.data(),
          .partial_ctas = static_cast<int32_t>((c.n + 15) / 16),
          .arrivals = out.arrivals.data()};
}

void RunCase(const Case& c) {
  SCOPED_TRACE(absl::StrCat("n=", c.n, " k=", c.k, " group=", c.group, " experts=", c.experts, " top_k=", c.top_k,
                            " shared=", c.shared));
  constexpr int32_t kTileRows = 8;
  std::mt19937 rng(static_cast<uint32_t>(c.n * 31 + c.k + c.experts * 7 + c.top_k));
  const AwqCase awq = MakeAwqCase(c.n, c.k, c.group, rng);
  const DeviceAwqCase w(awq);
  std::vector<uint16_t> attn;  // the attention output, bf16
  for (float v : Uniform(static_cast<size_t>(c.k), -1.0f, 1.0f, rng)) attn.push_back(FloatToBf16(v));
  const auto attn_d = Upload(attn);
  const std::vector<float> residual = Uniform(static_cast<size_t>(c.n), -2.0f, 2.0f, rng);
  const Router router(c, rng);

  // The before: o_proj, then the routing launch on its residual.
  Routed before(c, kTileRows);
  ASSERT_EQ(cudaMemcpy(before.y.data(), residual.data(), residual.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  const DecodeLinearParams plain{.x_bf16 = reinterpret_cast<const __nv_bfloat16*>(attn_d.data()),
                                 .y = before.y.data(),
                                 .m = 1,
                                 .n = c.n,
                                 .k = c.k,
                                 .epilogue = DecodeEpilogue::kAddResidual};
  ASSERT_EQ(cuda::LaunchAwqDecodeLinear(plain, w.view, nullptr), cudaSuccess);
  const DecodeMoeRoute separate = RouteOf(c, router, before, kTileRows);
  ASSERT_EQ(cuda::LaunchMoeRouteAndAlign(separate.route, separate.align, nullptr), cudaSuccess);

  Routed fused(c, kTileRows);
  DecodeLinearParams routing = plain;
  routing.y = fused.y.data();
  routing.moe_route = RouteOf(c, router, fused, kTileRows);
  for (int launch = 0; launch < 2; ++launch) {
    SCOPED_TRACE(absl::StrCat("launch ", launch));
    ASSERT_EQ(cudaMemcpy(fused.y.data(), residual.data(), residual.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cuda::LaunchAwqDecodeLinear(routing, w.view, nullptr), cudaSuccess);
    EXPECT_EQ(Download(fused.arrivals)[0], 0u) << "the arrival count is left at zero";
    EXPECT_EQ(Download(fused.y), Download(before.y)) << "the residual";
    EXPECT_EQ(Download(fused.ids), Download(before.ids)) << "the choices";
    EXPECT_EQ(Download(fused.num_tiles), Download(before.num_tiles));
    EXPECT_EQ(Download(fused.slot_of), Download(before.slot_of));
    EXPECT_EQ(Download(fused.slot_token), Download(before.slot_token));
    const auto tiles = Download(before.num_tiles)[0];
    const auto got_tiles = Download(fused.tile_expert), want_tiles = Download(before.tile_expert);
    for (int32_t t = 0; t < tiles; ++t) EXPECT_EQ(got_tiles[t], want_tiles[t]) << "tile " << t;
    const auto got_w = Download(fused.weights), want_w = Download(before.weights);
    for (size_t j = 0; j < want_w.size(); ++j) EXPECT_NEAR(got_w[j], want_w[j], 1e-6 * want_w[j] + 1e-7) << "weight " << j;
    const auto got_l = Download(fused.logits), want_l = Download(before.logits);
    for (size_t e = 0; e < want_l.size(); ++e)
      EXPECT_NEAR(got_l[e], want_l[e], 1e-5 * std::abs(want_l[e]) + 1e-6) << "logit " << e;
    // bf16 of the same value with inv_rms from sums in another order: at most one step apart.
    const auto got_n = Download(fused.normed), want_n = Download(before.normed);
    for (size_t i = 0; i < want_n.size(); ++i) {
      const float a = Bf16ToFloat(got_n[i]), b = Bf16ToFloat(want_n[i]);
      EXPECT_LE(std::abs(a - b), std::ldexp(std::abs(b), -7) + 1e-30f) << "normed " << i;
    }
  }
}

TEST(DecodeMoeRouteTest, RoutesLikeTheRoutingLaunchAfterIt) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  for (const Case c : {Case{128, 128, 64, 8, 3, 2}, Case{2560, 2560, 128, 64, 6, 2}, Case{200, 256, 32, 64, 8, 0},
                       Case{1024, 512, 128, 16, 1, 1}, Case{64, 64, 64, 33, 4, 2}})
    RunCase(c);
}

TEST(DecodeMoeRouteTest, BadParametersLaunchNothing) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  const Case c{128, 128, 64, 8, 3, 2};
  std::mt19937 rng(3);
  const DeviceAwqCase w(MakeAwqCase(c.n, c.k, c.group, rng));
  const auto attn = Zeros<uint16_t>(static_cast<size_t>(c.k));
  const Router router(c, rng);
  Routed out(c, 8);
  DecodeLinearParams ok{.x_bf16 = reinterpret_cast<const __nv_bfloat16*>(attn.data()),
                        .y = out.y.data(),
                        .m = 1,
                        .n = c.n,
                        .k = c.k,
                        .epilogue = DecodeEpilogue::kAddResidual};
  ok.moe_route = RouteOf(c, router, out, 8);
  ASSERT_EQ(cuda::LaunchAwqDecodeLinear(ok, w.view, nullptr), cudaSuccess);
  auto bad = ok;
  bad.m = 2;  // one token only
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.epilogue = DecodeEpilogue::kStore;  // the residual must be completed in place
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.moe_route.route.x = out.logits.data();  // routing another row than the one written
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.moe_route.partial_ctas = 0;  // fewer partial rows than CTAs (this shape's launch is one CTA)
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.moe_route.arrivals = nullptr;
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.moe_route.route.experts = cuda::kMoeOneTokenMaxExperts + 1;  // more than one warp chooses from
  bad.moe_route.align.experts = bad.moe_route.route.experts + c.shared;
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.moe_route.align.top_k = c.top_k;  // the shared experts left out of the alignment
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  // The other decode linears do not route.
  const auto bf16_w = Zeros<uint16_t>(static_cast<size_t>(c.n) * c.k);
  auto dense = ok;
  dense.w = reinterpret_cast<const __nv_bfloat16*>(bf16_w.data());
  EXPECT_EQ(cuda::LaunchDecodeLinear(dense, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace ernie::testing
