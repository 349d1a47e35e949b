// The fused decode linear on AWQ int4 weights (kernels/awq_decode_linear.h)
// against a float64 host computation of the same formula on the exact
// dequantised weights (awq_test_case.h's own unpacking): every row count
// 1..8, each prologue (float32 or bf16 input, RMS norm, gathered rows),
// each epilogue (store, residual add, SiLU-and-mul with its gate/up tile
// pairing, and the rotary + KV write against rotary_kv_write's kernel),
// groups 32, 64 and 128, widths that leave partial tiles. The kernel rounds
// its (normalised) input rows to bf16 once, so the host does too. Bad
// parameters launch nothing.
#include "engine/backend/cuda/kernels/awq_decode_linear.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/kernels/awq_repack.h"
#include "engine/util/half.h"
#include "tests/engine/cuda/awq_test_case.h"
#include "tests/engine/cuda/backend_runner.h"
#include "tests/engine/cuda/decode_linear_inputs.h"
#include "tests/engine/cuda/device_copies.h"
#include "tests/engine/cuda/rotary_epilogue_check.h"

namespace ernie::testing {
namespace {

using cuda::DecodeEpilogue;
using cuda::DecodeLinearParams;

// A repacked AWQ linear on the device.
struct DeviceAwqLinear {
  explicit DeviceAwqLinear(const AwqCase& c) {
    auto repacked = cuda::RepackAwqLinear(c.Raw());
    EXPECT_TRUE(repacked.ok()) << repacked.status();
    packed = Upload(repacked->packed);
    records = Upload(repacked->records);
    view = {.packed = packed.data(), .records = records.data(), .n = c.n, .k = c.k, .group_size = c.group};
  }
  cuda::DeviceBuffer<uint32_t> packed, records;
  cuda::AwqWeightsView view;
};

struct Case {
  int32_t m, n, k, group;
  DecodeEpilogue epilogue;
  bool bf16_input, norm, gather, bias;
};

std::string Name(const Case& c) {
  return absl::StrCat("m=", c.m, " n=", c.n, " k=", c.k, " group=", c.group, " epilogue=", static_cast<int>(c.epilogue),
                      " bf16_input=", c.bf16_input, " norm=", c.norm, " gather=", c.gather, " bias=", c.bias);
}

void RunCase(const Case& c) {
  SCOPED_TRACE(Name(c));
  std::mt19937 rng(static_cast<uint32_t>(c.m * 7919 + c.n * 31 + c.k + c.group));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const AwqCase awq = MakeAwqCase(c.n, c.k, c.group, rng);
  const DecodeLinearInputs inputs = MakeDecodeLinearInputs(c.m, c.n, c.k, c.epilogue, c.bf16_input, c.gather, rng);
  const auto& [x, x_bf, norm_w, bias, rows, y0, out_width] = inputs;

  // Host reference in float64 on the input rows as the kernel rounds them.
  std::vector<double> expect(y0.size());
  for (int32_t r = 0; r < c.m; ++r) {
    const float* xr = x.data() + static_cast<size_t>(rows[static_cast<size_t>(r)]) * c.k;
    std::vector<double> in(xr, xr + c.k);
    double scale = 1.0;
    if (c.norm) {
      double ss = 0;
      for (double v : in) ss += v * v;
      scale = 1.0 / std::sqrt(ss / c.k + 1e-5);
    }
    for (int32_t i = 0; i < c.k; ++i) {
      const auto at = static_cast<size_t>(i);
      const double v = c.norm ? norm_w[at] * (in[at] * scale) : in[at];
      in[at] = Bf16ToFloat(FloatToBf16(static_cast<float>(v)));
    }
    std::vector<double> dot(static_cast<size_t>(c.n));
    for (int32_t o = 0; o < c.n; ++o) {
      double d = c.bias ? bias[static_cast<size_t>(o)] : 0.0;
      for (int32_t i = 0; i < c.k; ++i) d += in[static_cast<size_t>(i)] * awq.w[static_cast<size_t>(o) * c.k + i];
      dot[static_cast<size_t>(o)] = d;
    }
    ExpectEpilogue(c.epilogue, r, dot, inputs, expect);
  }

  const DeviceAwqLinear w(awq);
  DeviceDecodeLinearInputs device(inputs);
  const DecodeLinearParams p = device.Params(c);  // the int4 weights go beside it
  ASSERT_EQ(cuda::LaunchAwqDecodeLinear(p, w.view, nullptr), cudaSuccess);
  const auto got = Download(device.y);
  // Exact products summed in float32 (tensor cores), scaled per group: well
  // under 1e-4 of the sums' size; an input element rounded to the other
  // bf16 neighbour (float32 norm vs the host's float64) moves a sum by far
  // less than the bound. A wrong row, tile or group is off by O(1).
  const double tol = 1e-4 * std::sqrt(static_cast<double>(c.k));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expect[i], tol * (1.0 + std::abs(expect[i]))) << "output " << i;
}

TEST(AwqDecodeLinearTest, MatchesTheHostFormulaForEveryRowCountAndFusion) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  ASSERT_EQ(cuda::PrepareAwqDecodeLinear(3072, 8), cudaSuccess);
  for (int32_t m = 1; m <= cuda::kDecodeLinearMaxRows; ++m) {
    RunCase({m, 2560, 1024, 128, DecodeEpilogue::kStore, false, true, m % 2 == 0, m % 3 == 0});
    RunCase({m, 1024, 1024, 128, DecodeEpilogue::kAddResidual, true, false, false, true});
    RunCase({m, 6144, 1024, 128, DecodeEpilogue::kSiluMul, false, true, false, m % 2 == 1});
    RunCase({m, 1024, 3072, 128, DecodeEpilogue::kAddResidual, false, false, false, m == 8});
  }
  // Groups of 32 and 64, widths that leave partial tiles and CTAs, k not a
  // multiple of the 256-k chunk, gathered rows.
  RunCase({1, 200, 320, 64, DecodeEpilogue::kStore, false, true, false, true});
  RunCase({3, 96, 448, 32, DecodeEpilogue::kSiluMul, false, true, true, true});
  RunCase({7, 1000, 1344, 64, DecodeEpilogue::kAddResidual, false, true, true, false});
  RunCase({5, 2080, 512, 32, DecodeEpilogue::kSiluMul, true, false, false, false});
}

// kRotaryKv against kStore + rotary_kv_write's kernel (rotary_epilogue_check.h).
TEST(AwqDecodeLinearTest, RotaryKvEpilogueEqualsTheRotaryKernel) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 rng(99);
  const AwqCase awq = MakeAwqCase(kRotaryCheckN, kRotaryCheckK, 64, rng);
  const DeviceAwqLinear w(awq);
  ExpectRotaryKvEpilogueEqualsTheRotaryKernel(
      [&](const DecodeLinearParams& p) { return cuda::LaunchAwqDecodeLinear(p, w.view, nullptr); });
}

TEST(AwqDecodeLinearTest, BadParametersLaunchNothing) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 rng(5);
  const AwqCase awq = MakeAwqCase(64, 128, 64, rng);
  const DeviceAwqLinear w(awq);
  auto buffer = Zeros<float>(1024);
  float* y = buffer.data();
  const DecodeLinearParams ok{.x_f32 = y, .y = y + 512, .m = 1, .n = 64, .k = 128};
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(ok, w.view, nullptr), cudaSuccess);
  auto bad = ok;
  bad.m = 9;  // more rows than the kernel holds
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.k = 64;  // not the weights' k
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.x_bf16 = reinterpret_cast<const __nv_bfloat16*>(y);  // two inputs
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.epilogue = DecodeEpilogue::kRotaryKv;  // without positions, slots or a cache
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  cuda::AwqWeightsView no_records = w.view;
  no_records.records = nullptr;
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(ok, no_records, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace ernie::testing
