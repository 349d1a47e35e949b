// The cluster decode linear (kernels/cluster_decode_linear.h) against a
// float64 host computation of its formula: y = (W bf16(g x)) / rms(x) +
// bias for float32 input with a norm, W bf16(x) without, W x for bf16
// input; each epilogue; row counts 1 to 64 (every x-tile count), clusters of
// 1 to 16 slices, 64- and 128-row CTAs (a layer as wide as the 0.3b's
// gate/up takes the latter), gathered rows. The host rounds the input to
// bf16 exactly where the kernel does, so the only differences left are
// float32 sums (same tolerance as decode_linear_test). Results must repeat
// bit for bit (the cluster sums in a fixed order). Bad parameters launch
// nothing.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/kernels/cluster_decode_linear.h"
#include "engine/util/half.h"
#include "tests/engine/cuda/backend_runner.h"
#include "tests/engine/cuda/decode_linear_inputs.h"
#include "tests/engine/cuda/device_copies.h"
#include "tests/engine/cuda/rotary_epilogue_check.h"

namespace ernie::testing {
namespace {

using cuda::DecodeEpilogue;
using cuda::DecodeLinearParams;

struct Case {
  int32_t m, n, k;
  DecodeEpilogue epilogue;
  bool bf16_input, norm, gather, bias;
};

void RunCase(const Case& c) {
  SCOPED_TRACE(absl::StrCat("m=", c.m, " n=", c.n, " k=", c.k, " epilogue=", static_cast<int>(c.epilogue),
                            " bf16_input=", c.bf16_input, " norm=", c.norm, " gather=", c.gather, " bias=", c.bias));
  std::mt19937 rng(static_cast<uint32_t>(c.m * 7919 + c.n * 31 + c.k));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const DecodeLinearInputs inputs = MakeDecodeLinearInputs(c.m, c.n, c.k, c.epilogue, c.bf16_input, c.gather, rng);
  const auto& [x, x_bf, norm_w, bias, rows, y0, out_width] = inputs;
  std::vector<uint16_t> w(static_cast<size_t>(c.n) * c.k);
  for (auto& v : w) v = FloatToBf16(uni(rng) * 0.1f);

  std::vector<double> expect(y0.size());
  for (int32_t r = 0; r < c.m; ++r) {
    const float* xr = x.data() + static_cast<size_t>(rows[static_cast<size_t>(r)]) * c.k;
    std::vector<double> in(static_cast<size_t>(c.k));
    double ss = 0.0;
    for (int32_t i = 0; i < c.k; ++i) {
      const float g = c.norm ? norm_w[static_cast<size_t>(i)] : 1.0f;
      in[static_cast<size_t>(i)] = c.bf16_input ? xr[i] : Bf16ToFloat(FloatToBf16(g * xr[i]));
      ss += static_cast<double>(xr[i]) * xr[i];
    }
    const double inv_rms = c.norm ? 1.0 / std::sqrt(ss / c.k + 1e-5) : 1.0;
    std::vector<double> dot(static_cast<size_t>(c.n));
    for (int32_t o = 0; o < c.n; ++o) {
      double d = 0.0;
      for (int32_t i = 0; i < c.k; ++i)
        d += in[static_cast<size_t>(i)] * Bf16ToFloat(w[static_cast<size_t>(o) * c.k + i]);
      dot[static_cast<size_t>(o)] = d * inv_rms + (c.bias ? bias[static_cast<size_t>(o)] : 0.0);
    }
    ExpectEpilogue(c.epilogue, r, dot, inputs, expect);
  }

  DeviceDecodeLinearInputs device(inputs);
  const auto d_w = Upload(w);
  DecodeLinearParams p = device.Params(c);
  p.w = reinterpret_cast<const __nv_bfloat16*>(d_w.data());
  ASSERT_EQ(cuda::LaunchClusterDecodeLinear(p, nullptr), cudaSuccess);
  const auto got = Download(device.y);
  const double tol = 2e-5 * std::sqrt(static_cast<double>(c.k)) * 4.0;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expect[i], tol * (1.0 + std::abs(expect[i]))) << "output " << i;
  if (c.epilogue == DecodeEpilogue::kAddResidual) return;  // a second run would add twice
  ASSERT_EQ(cuda::LaunchClusterDecodeLinear(p, nullptr), cudaSuccess);
  EXPECT_EQ(Download(device.y), got) << "a second run differs";
}

TEST(ClusterDecodeLinearTest, MatchesTheHostFormulaForEveryRowCountAndFusion) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  ASSERT_EQ(cuda::PrepareClusterDecodeLinear(), cudaSuccess);
  for (int32_t m : {1, 8, 9, 16, 23, 33, 48, 64}) {
    // The 0.3b's layer shapes: qkv (4 slices), gate/up (4 slices, 128-row
    // CTAs), o_proj on bf16 attention output (8), down (12: a non-portable cluster).
    RunCase({m, 2560, 1024, DecodeEpilogue::kStore, false, true, m % 2 == 0, m % 3 == 0});
    RunCase({m, 6144, 1024, DecodeEpilogue::kSiluMul, false, true, false, m % 2 == 1});
    RunCase({m, 1024, 2048, DecodeEpilogue::kAddResidual, true, false, false, true});
    RunCase({m, 1024, 3072, DecodeEpilogue::kAddResidual, false, false, false, m == 64});
  }
  // One slice; sixteen; SiLU on 64-row CTAs; float32 input without a norm.
  RunCase({5, 64, 256, DecodeEpilogue::kStore, false, true, true, true});
  RunCase({40, 128, 4096, DecodeEpilogue::kStore, false, true, false, false});
  RunCase({17, 128, 512, DecodeEpilogue::kSiluMul, false, false, false, true});
  RunCase({64, 192, 768, DecodeEpilogue::kStore, false, false, true, true});
}

// kRotaryKv against kStore + rotary_kv_write's kernel (rotary_epilogue_check.h).
TEST(ClusterDecodeLinearTest, RotaryKvEpilogueEqualsTheRotaryKernel) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  ASSERT_EQ(cuda::PrepareClusterDecodeLinear(), cudaSuccess);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<uint16_t> w(static_cast<size_t>(kRotaryCheckN) * kRotaryCheckK);
  for (auto& v : w) v = FloatToBf16(uni(rng) * 0.1f);
  const auto d_w = Upload(w);
  ExpectRotaryKvEpilogueEqualsTheRotaryKernel([&](const DecodeLinearParams& p) {
    DecodeLinearParams with_weights = p;
    with_weights.w = reinterpret_cast<const __nv_bfloat16*>(d_w.data());
    return cuda::LaunchClusterDecodeLinear(with_weights, nullptr);
  });
}

TEST(ClusterDecodeLinearTest, BadParametersLaunchNothing) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  ASSERT_EQ(cuda::PrepareClusterDecodeLinear(), cudaSuccess);
  auto x = Zeros<float>(64 * 512), weights = Zeros<float>(64 * 512), out = Zeros<float>(64 * 64);
  const auto* w = reinterpret_cast<const __nv_bfloat16*>(weights.data());
  const DecodeLinearParams ok{.x_f32 = x.data(), .w = w, .y = out.data(), .m = 9, .n = 64, .k = 256};
  EXPECT_EQ(cuda::LaunchClusterDecodeLinear(ok, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto bad = ok;
  bad.m = 65;  // more rows than the kernel holds
  EXPECT_EQ(cuda::LaunchClusterDecodeLinear(bad, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.k = 128;  // not a whole slice
  EXPECT_EQ(cuda::LaunchClusterDecodeLinear(bad, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.k = 17 * 256;  // more slices than a cluster holds
  EXPECT_EQ(cuda::LaunchClusterDecodeLinear(bad, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.n = 96;  // not whole row groups
  EXPECT_EQ(cuda::LaunchClusterDecodeLinear(bad, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.x_bf16 = w;  // two inputs
  EXPECT_EQ(cuda::LaunchClusterDecodeLinear(bad, nullptr), cudaErrorInvalidValue);
  // The 21B-A3B's dense down_proj: k = 12,288 is 48 slices.
  EXPECT_FALSE(cuda::ClusterDecodeLinearSupports(2560, 12288, DecodeEpilogue::kAddResidual));
}

}  // namespace
}  // namespace ernie::testing
