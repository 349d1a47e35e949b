// The small-batch GEMM's fused epilogues (kernels/small_batch_gemm.h)
// against the kernels they replace: kSiluMul against its own kStore sums
// put through SiLU-and-mul on the host (the same float expression), and
// kRotaryKv against kStore followed by rotary_kv_write's kernel
// (rotary_epilogue_check.h). The plain kStore output is checked against a
// float64 reference in cuda_linear_kernels_test.cc (the same test binary).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/kernels/small_batch_gemm.h"
#include "engine/util/half.h"
#include "tests/engine/cuda/backend_runner.h"
#include "tests/engine/cuda/device_copies.h"
#include "tests/engine/cuda/random_inputs.h"
#include "tests/engine/cuda/rotary_epilogue_check.h"

namespace ernie::testing {
namespace {

using cuda::DeviceBuffer;
using cuda::LinearOutput;
using cuda::SmallBatchEpilogue;

// Gate rows [0, width) and up rows [width, 2 width) of a bias-carrying
// gate|up, for each row count given and slice counts 2 - 8.
void ExpectSiluMulEqualsSiluOfTheStoredSums(const std::vector<int>& row_counts) {
  std::mt19937 gen(11);
  for (const int width : {32, 96, 1536})
    for (const int k : {256, 1024})
      for (const int m : row_counts) {
        SCOPED_TRACE(absl::StrCat("width=", width, " k=", k, " m=", m));
        const int n = 2 * width;
        const auto w = Upload(RandomBf16(static_cast<size_t>(n) * k, gen, 0.1f));
        const auto x = Upload(RandomBf16(static_cast<size_t>(m) * k, gen, 1.0f));
        std::vector<float> bias_host(static_cast<size_t>(n));
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (auto& v : bias_host) v = dist(gen);
        const auto bias = Upload(bias_host);
        auto sums = DeviceBuffer<float>::Allocate(static_cast<size_t>(m) * n, "sums");
        auto act = DeviceBuffer<float>::Allocate(static_cast<size_t>(m) * width, "act");
        auto act_bf16 = DeviceBuffer<uint16_t>::Allocate(static_cast<size_t>(m) * width, "act bf16");
        ASSERT_TRUE(sums.ok() && act.ok() && act_bf16.ok());
        cuda::SmallBatchGemmParams p{.x = reinterpret_cast<const __nv_bfloat16*>(x.data()),
                                     .w = reinterpret_cast<const __nv_bfloat16*>(w.data()),
                                     .y = sums->data(),
                                     .m = m,
                                     .n = n,
                                     .k = k,
                                     .bias = bias.data()};
        ASSERT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaSuccess);
        p.epilogue = SmallBatchEpilogue::kSiluMul;
        p.y = act->data();
        ASSERT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaSuccess);
        p.y = act_bf16->data();
        p.out = LinearOutput::kBf16;
        ASSERT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaSuccess);
        const auto s = Download(*sums), a = Download(*act);
        const auto a16 = Download(*act_bf16);
        for (int r = 0; r < m; ++r)
          for (int j = 0; j < width; ++j) {
            const float g = s[static_cast<size_t>(r) * n + j], u = s[static_cast<size_t>(r) * n + width + j];
            const float want = g / (1.0f + std::exp(-g)) * u;
            const size_t at = static_cast<size_t>(r) * width + j;
            ASSERT_NEAR(a[at], want, 1e-5 * (1.0 + std::fabs(want))) << "row " << r << " column " << j;
            ASSERT_NEAR(Bf16ToFloat(a16[at]), want, std::fabs(want) / 128.0 + 1e-6) << "bf16, row " << r;
          }
      }
}

TEST(SmallBatchGemmEpilogueTest, SiluMulEqualsSiluOfTheStoredSums) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  ExpectSiluMulEqualsSiluOfTheStoredSums({1, 5, 16, 23, 40, 130, 256});
}

// kRotaryKv against kStore + rotary_kv_write's kernel (rotary_epilogue_check.h),
// the check's float32 inputs rounded to bf16 first (the GEMM's input type).
void ExpectRotaryKvEpilogueEqualsTheRotaryKernelFor(const std::vector<int32_t>& row_counts) {
  std::mt19937 gen(7);
  const auto w = Upload(RandomBf16(static_cast<size_t>(kRotaryCheckN) * kRotaryCheckK, gen, 0.1f));
  DeviceBuffer<uint16_t> x;  // the launch's input, alive until the check has synchronised
  ExpectRotaryKvEpilogueEqualsTheRotaryKernel([&](const cuda::DecodeLinearParams& d) {
    std::vector<float> x_host(static_cast<size_t>(d.m) * d.k);
    cudaError_t e = cudaMemcpy(x_host.data(), d.x_f32, x_host.size() * sizeof(float), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return e;
    std::vector<uint16_t> x_bf16(x_host.size());
    for (size_t i = 0; i < x_host.size(); ++i) x_bf16[i] = FloatToBf16(x_host[i]);
    cudaError_t synced = cudaDeviceSynchronize();  // the previous launch's input may be freed now
    if (synced != cudaSuccess) return synced;
    x = Upload(x_bf16);
    return cuda::LaunchSmallBatchGemm(
        {.x = reinterpret_cast<const __nv_bfloat16*>(x.data()),
         .w = reinterpret_cast<const __nv_bfloat16*>(w.data()),
         .y = d.y,
         .m = d.m,
         .n = d.n,
         .k = d.k,
         .epilogue = d.epilogue == cuda::DecodeEpilogue::kRotaryKv ? SmallBatchEpilogue::kRotaryKv
                                                                    : SmallBatchEpilogue::kStore,
         .bias = d.bias,
         .rotary = d.rotary},
        nullptr);
  }, row_counts);
}

TEST(SmallBatchGemmEpilogueTest, RotaryKvEpilogueEqualsTheRotaryKernel) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  ExpectRotaryKvEpilogueEqualsTheRotaryKernelFor({1, 3, 8, 40, 64});
}

TEST(SmallBatchGemmEpilogueTest, RejectsEpiloguesItCannotRun) {
  // Checked before any CUDA call, so this runs without a device too.
  alignas(16) static uint16_t data[64] = {};
  const auto* x = reinterpret_cast<const __nv_bfloat16*>(data);
  const cuda::SmallBatchGemmParams ok{.x = x, .w = x, .y = data, .m = 1, .n = 128, .k = 128};
  cuda::SmallBatchGemmParams p = ok;
  p.epilogue = SmallBatchEpilogue::kSiluMul;
  p.n = 96;  // the 32 gate rows of a CTA need their 32 up rows: n a multiple of 64
  EXPECT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaErrorInvalidValue);
  p = ok;
  p.epilogue = SmallBatchEpilogue::kRotaryKv;  // no positions, slots or cache
  EXPECT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaErrorInvalidValue);
  p = ok;
  p.epilogue = SmallBatchEpilogue::kSiluMul;
  p.accumulate = true;
  EXPECT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace ernie::testing
