// The fused decode GEMV (kernels/decode_linear.h) against a float64 host
// computation of the same formula: every row count 1..8, odd and even
// output widths, k from one 16-byte load to 3,072, batch 1 with and without
// its single-wave launch shapes, each prologue (float32 or
// bf16 input, RMS norm, gathered rows) and each epilogue (store, SiLU-and-mul,
// residual add; the rotary + KV write against rotary_kv_write's kernel),
// biases on and off. Bad parameters launch nothing.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/kernels/decode_linear.h"
#include "engine/util/half.h"
#include "tests/engine/cuda/backend_runner.h"
#include "tests/engine/cuda/decode_linear_inputs.h"
#include "tests/engine/cuda/rotary_epilogue_check.h"

namespace ernie::testing {
namespace {

using cuda::DecodeEpilogue;
using cuda::DecodeLinearParams;
using cuda::kDecodeLinearMaxRows;
using cuda::LaunchDecodeLinear;
using cuda::PrepareDecodeLinear;

template <typename T>
T* Upload(const std::vector<T>& host) {
  T* dev = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return dev;
}

template <typename T>
std::vector<T> Download(const T* dev, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

struct Case {
  int32_t m, n, k;
  DecodeEpilogue epilogue;
  bool bf16_input, norm, gather, bias;
  bool single_wave = true;   // DecodeLinearParams::single_wave
  bool split_long_k = true;  // DecodeLinearParams::split_long_k
};

std::string Name(const Case& c) {
  return absl::StrCat("m=", c.m, " n=", c.n, " k=", c.k, " epilogue=", static_cast<int>(c.epilogue),
                      " bf16_input=", c.bf16_input, " norm=", c.norm, " gather=", c.gather, " bias=", c.bias,
                      " single_wave=", c.single_wave, " split_long_k=", c.split_long_k);
}

void RunCase(const Case& c) {
  SCOPED_TRACE(Name(c));
  std::mt19937 rng(static_cast<uint32_t>(c.m * 7919 + c.n * 31 + c.k));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const DecodeLinearInputs inputs = MakeDecodeLinearInputs(c.m, c.n, c.k, c.epilogue, c.bf16_input, c.gather, rng);
  const auto& [x, x_bf, norm_w, bias, rows, y0, out_width] = inputs;
  std::vector<float> w_f(static_cast<size_t>(c.n) * c.k);
  std::vector<uint16_t> w(w_f.size());
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = FloatToBf16(uni(rng) * 0.1f);
    w_f[i] = Bf16ToFloat(w[i]);
  }

  // Host reference in float64.
  std::vector<double> expect(y0.size());
  for (int32_t r = 0; r < c.m; ++r) {
    const float* xr = x.data() + static_cast<size_t>(rows[static_cast<size_t>(r)]) * c.k;
    std::vector<double> in(xr, xr + c.k);
    if (c.norm) {
      double ss = 0;
      for (double v : in) ss += v * v;
      const double scale = 1.0 / std::sqrt(ss / c.k + 1e-5);
      for (int32_t i = 0; i < c.k; ++i) in[static_cast<size_t>(i)] = norm_w[static_cast<size_t>(i)] * (in[static_cast<size_t>(i)] * scale);
    }
    std::vector<double> dot(static_cast<size_t>(c.n));
    for (int32_t o = 0; o < c.n; ++o) {
      double d = c.bias ? bias[static_cast<size_t>(o)] : 0.0;
      for (int32_t i = 0; i < c.k; ++i) d += in[static_cast<size_t>(i)] * w_f[static_cast<size_t>(o) * c.k + i];
      dot[static_cast<size_t>(o)] = d;
    }
    ExpectEpilogue(c.epilogue, r, dot, inputs, expect);
  }

  DeviceDecodeLinearInputs device(inputs);
  uint16_t* d_w = Upload(w);
  DecodeLinearParams p = device.Params(c);
  p.w = reinterpret_cast<const __nv_bfloat16*>(d_w);
  p.single_wave = c.single_wave;
  p.split_long_k = c.split_long_k;
  ASSERT_EQ(LaunchDecodeLinear(p, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = Download(device.y.data(), y0.size());
  // float32 sums of k products of size ~0.3 (k <= 3,072): a few ulps of the
  // sum's magnitude, far above reordering noise; scaled by sqrt(k).
  const double tol = 2e-5 * std::sqrt(static_cast<double>(c.k)) * 4.0;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expect[i], tol * (1.0 + std::abs(expect[i]))) << "output " << i;
  cudaFree(d_w);
}

TEST(DecodeLinearTest, MatchesTheHostFormulaForEveryRowCountAndFusion) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  ASSERT_EQ(PrepareDecodeLinear(3072, 8), cudaSuccess);
  for (int32_t m = 1; m <= kDecodeLinearMaxRows; ++m) {
    RunCase({m, 97, 1024, DecodeEpilogue::kStore, false, true, false, false});
    RunCase({m, 2560, 1024, DecodeEpilogue::kStore, false, true, m % 2 == 0, m % 3 == 0});
    RunCase({m, 1024, 2048, DecodeEpilogue::kAddResidual, true, false, false, true});
    RunCase({m, 6144, 1024, DecodeEpilogue::kSiluMul, false, true, false, m % 2 == 1});
    RunCase({m, 1024, 3072, DecodeEpilogue::kAddResidual, false, false, false, m == 8});
  }
  // Odd sizes: one 16-byte load per row, k not a multiple of 256, n of 1 and 3.
  RunCase({1, 1, 8, DecodeEpilogue::kStore, false, false, false, true});
  RunCase({3, 3, 24, DecodeEpilogue::kStore, true, false, false, false});
  RunCase({7, 333, 1000, DecodeEpilogue::kAddResidual, false, true, false, true});
  RunCase({5, 22, 264, DecodeEpilogue::kSiluMul, false, true, true, true});
  // Batch 1's launch shapes (single_wave): two row pairs a warp where one a
  // warp is more than a wave (gate|up-sized, and a pair count that leaves
  // the last warps one pair), six-chunk steps for 2,048 < k <= 3,072 (a
  // partial last step too); and the same shapes without (the before).
  for (const bool single_wave : {true, false}) {
    RunCase({1, 6150, 1024, DecodeEpilogue::kSiluMul, false, true, false, true, single_wave});
    RunCase({1, 999, 2504, DecodeEpilogue::kAddResidual, false, true, false, true, single_wave});
    RunCase({1, 1024, 3072, DecodeEpilogue::kStore, true, false, false, false, single_wave});
  }
  // Rows of k > 2,048 on one warp a pair (the before of split_long_k; the
  // cases above split them over two, k = 2,504 into halves of 1,256 and 1,248,
  // k = 3,072 into whole loop steps, 2,048 and 1,024: kWholeSteps, the form
  // every k that is a multiple of 1,024 above takes).
  for (const int32_t m : {1, 2, 8}) {
    RunCase({m, 1024, 3072, DecodeEpilogue::kAddResidual, false, false, false, true, true, false});
    RunCase({m, 999, 2504, DecodeEpilogue::kAddResidual, false, true, false, true, true, false});
    RunCase({m, 998, 2560, DecodeEpilogue::kSiluMul, false, true, m == 2, true, true, false});
    RunCase({m, 998, 2560, DecodeEpilogue::kSiluMul, false, true, m == 2, true, true, true});
  }
  // lm_head-sized: more row pairs than CTAs, so warps loop.
  RunCase({2, 40001, 64, DecodeEpilogue::kStore, false, true, true, false});
}

// kRotaryKv against kStore + rotary_kv_write's kernel (rotary_epilogue_check.h).
TEST(DecodeLinearTest, RotaryKvEpilogueEqualsTheRotaryKernel) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<uint16_t> w(static_cast<size_t>(kRotaryCheckN) * kRotaryCheckK);
  for (auto& v : w) v = FloatToBf16(uni(rng) * 0.1f);
  uint16_t* d_w = Upload(w);
  ExpectRotaryKvEpilogueEqualsTheRotaryKernel([&](const DecodeLinearParams& p) {
    DecodeLinearParams with_weights = p;
    with_weights.w = reinterpret_cast<const __nv_bfloat16*>(d_w);
    return LaunchDecodeLinear(with_weights, nullptr);
  });
  cudaFree(d_w);
}

TEST(DecodeLinearTest, BadParametersLaunchNothing) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  float* y = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&y), 64 * sizeof(float)), cudaSuccess);
  const auto* w = reinterpret_cast<const __nv_bfloat16*>(y);
  const DecodeLinearParams ok{.x_f32 = y, .w = w, .y = y, .m = 1, .n = 2, .k = 8};
  EXPECT_EQ(LaunchDecodeLinear(ok, nullptr), cudaSuccess);
  auto bad = ok;
  bad.m = 9;  // more rows than the kernels hold
  EXPECT_EQ(LaunchDecodeLinear(bad, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.k = 12;  // not a whole number of 16-byte loads
  EXPECT_EQ(LaunchDecodeLinear(bad, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.x_bf16 = w;  // two inputs
  EXPECT_EQ(LaunchDecodeLinear(bad, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.n = 3;
  bad.epilogue = DecodeEpilogue::kSiluMul;  // gate and up rows must pair up
  EXPECT_EQ(LaunchDecodeLinear(bad, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.x_f32 = nullptr;
  bad.x_bf16 = w;
  bad.norm_weight = y;  // the norm reads the float32 residual stream only
  EXPECT_EQ(LaunchDecodeLinear(bad, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.epilogue = DecodeEpilogue::kRotaryKv;  // without positions, slots or a cache
  EXPECT_EQ(LaunchDecodeLinear(bad, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.x_f32 = y + 1;  // the input is read as float4s
  EXPECT_EQ(LaunchDecodeLinear(bad, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.norm_weight = y + 2;  // so is the norm weight
  EXPECT_EQ(LaunchDecodeLinear(bad, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(y);
}

}  // namespace
}  // namespace ernie::testing
