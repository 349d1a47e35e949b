// The small-batch GEMM's split RMSNorm (kernels/small_batch_gemm.h:
// kAddResidualNorm in the launch before the norm, SmallBatchRowNorm in the
// launch after it) against the host:
//   - kAddResidualNorm adds exactly what kStore stores to the residual, and
//     writes bf16(x * g) and each 64-row CTA's sum of squares of the new x;
//   - a row norm scales each output of x row m by 1 / sqrt(mean + eps) of
//     the partial sums before the bias (float64 reference), in every
//     epilogue that reads the sums (kStore, kSiluMul);
//   - the pair together equals RMSNorm followed by the linear.
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

namespace ernie::testing {
namespace {

using cuda::DeviceBuffer;
using cuda::kRowNormSumsqStride;
using cuda::SmallBatchEpilogue;

std::vector<uint16_t> ToBf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = FloatToBf16(v[i]);
  return out;
}

const __nv_bfloat16* AsBf16(const DeviceBuffer<uint16_t>& b) {
  return reinterpret_cast<const __nv_bfloat16*>(b.data());
}

TEST(SmallBatchGemmNormTest, AddResidualNormAddsTheSumsAndWritesScaledRowsAndSquares) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(5);
  for (const int n : {64, 1024})
    for (const int k : {128, 2048, 3072})
      for (const int m : {1, 7, 40, 64, 130}) {
        SCOPED_TRACE(absl::StrCat("n=", n, " k=", k, " m=", m));
        const auto w = Upload(ToBf16(RandomFloats(static_cast<size_t>(n) * k, gen, 0.05f)));
        const auto x = Upload(ToBf16(RandomFloats(static_cast<size_t>(m) * k, gen, 1.0f)));
        const auto bias = Upload(RandomFloats(static_cast<size_t>(n), gen, 0.5f));
        const auto g = Upload(RandomFloats(static_cast<size_t>(n), gen, 2.0f));
        const std::vector<float> residual = RandomFloats(static_cast<size_t>(m) * n, gen, 3.0f);
        auto sums = Zeros<float>(static_cast<size_t>(m) * n);
        auto y = Upload(residual);
        auto normed = Zeros<uint16_t>(static_cast<size_t>(m) * n);
        auto sumsq = Zeros<float>(static_cast<size_t>(n / 64) * kRowNormSumsqStride);
        cuda::SmallBatchGemmParams p{
            .x = AsBf16(x), .w = AsBf16(w), .y = sums.data(), .m = m, .n = n, .k = k, .bias = bias.data()};
        ASSERT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaSuccess);
        p.y = y.data();
        p.epilogue = SmallBatchEpilogue::kAddResidualNorm;
        p.norm_out = {.weight = g.data(), .out = reinterpret_cast<__nv_bfloat16*>(normed.data()), .sumsq = sumsq.data()};
        ASSERT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaSuccess);
        const auto s = Download(sums), got_y = Download(y), gw = Download(g), got_sumsq = Download(sumsq);
        const auto got_normed = Download(normed);
        for (int r = 0; r < m; ++r) {
          for (int t = 0; t < n / 64; ++t) {
            double squares = 0;
            for (int c = 64 * t; c < 64 * t + 64; ++c) {
              const size_t at = static_cast<size_t>(r) * n + c;
              const float want = residual[at] + s[at];  // the same two floats the kernel adds
              ASSERT_EQ(got_y[at], want) << "row " << r << " column " << c;
              ASSERT_EQ(got_normed[at], FloatToBf16(want * gw[static_cast<size_t>(c)])) << "row " << r << " col " << c;
              squares += double{want} * want;
            }
            const float got = got_sumsq[static_cast<size_t>(t) * kRowNormSumsqStride + r];
            ASSERT_NEAR(got, squares, 1e-5 * squares) << "row " << r << " part " << t;
          }
        }
      }
}

// x (float32 rows of width `width`), g, and the split norm's inputs made
// from them on the host: bf16(x * g) and the sums of squares of each 64
// columns; the float64 RMSNorm scale of each row.
struct SplitNormInputs {
  DeviceBuffer<uint16_t> scaled;  // bf16(x * g) [m, width]
  DeviceBuffer<float> sumsq;      // [width / 64][kRowNormSumsqStride]
  std::vector<float> scaled_host;
  std::vector<double> row_scale;  // [m]
};

SplitNormInputs MakeSplitNormInputs(int m, int width, float eps, std::mt19937& gen) {
  const std::vector<float> x = RandomFloats(static_cast<size_t>(m) * width, gen, 4.0f);
  const std::vector<float> g = RandomFloats(static_cast<size_t>(width), gen, 1.5f);
  SplitNormInputs in;
  std::vector<float> sumsq(static_cast<size_t>(width / 64) * kRowNormSumsqStride, 0.0f);
  std::vector<uint16_t> scaled(x.size());
  in.scaled_host.resize(x.size());
  for (int r = 0; r < m; ++r) {
    double total = 0;
    for (int c = 0; c < width; ++c) {
      const size_t at = static_cast<size_t>(r) * width + c;
      scaled[at] = FloatToBf16(x[at] * g[static_cast<size_t>(c)]);
      in.scaled_host[at] = Bf16ToFloat(scaled[at]);
      sumsq[static_cast<size_t>(c / 64) * kRowNormSumsqStride + r] += x[at] * x[at];
      total += double{x[at]} * x[at];
    }
    in.row_scale.push_back(1.0 / std::sqrt(total / width + eps));
  }
  in.scaled = Upload(scaled);
  in.sumsq = Upload(sumsq);
  return in;
}

TEST(SmallBatchGemmNormTest, RowNormScalesEachRowBeforeTheBias) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(9);
  constexpr float kEps = 1e-5f;
  struct Shape {
    int k, n;
    std::vector<int> row_counts;
  };
  // k: one slice, the 0.3b's hidden size (gate|up), the 21B-A3B's; row
  // counts across the wgmma widths and a second block of 128 on grid z.
  for (const Shape& shape : {Shape{64, 128, {1, 5, 16, 33, 64, 200}}, Shape{1024, 3072, {1, 16, 64}},
                             Shape{2560, 128, {5, 33, 200}}})
    for (const int m : shape.row_counts) {
        const int k = shape.k, n = shape.n;
        SCOPED_TRACE(absl::StrCat("k=", k, " n=", n, " m=", m));
        const SplitNormInputs in = MakeSplitNormInputs(m, k, kEps, gen);
        const std::vector<float> w_host = RandomFloats(static_cast<size_t>(n) * k, gen, 0.05f);
        const auto w = Upload(ToBf16(w_host));
        const std::vector<float> bias_host = RandomFloats(static_cast<size_t>(n), gen, 1.0f);
        const auto bias = Upload(bias_host);
        auto y = Zeros<float>(static_cast<size_t>(m) * n);
        auto act = Zeros<float>(static_cast<size_t>(m) * n / 2);
        cuda::SmallBatchGemmParams p{.x = AsBf16(in.scaled),
                                     .w = AsBf16(w),
                                     .y = y.data(),
                                     .m = m,
                                     .n = n,
                                     .k = k,
                                     .bias = bias.data(),
                                     .row_norm = {.sumsq = in.sumsq.data(), .width = k, .eps = kEps}};
        ASSERT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaSuccess);
        p.epilogue = SmallBatchEpilogue::kSiluMul;
        p.y = act.data();
        ASSERT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaSuccess);
        const auto got = Download(y), got_act = Download(act);
        for (int r = 0; r < m; ++r)
          for (int j = 0; j < n; ++j) {
            double dot = 0, magnitude = 0;
            for (int c = 0; c < k; ++c) {
              const double term = double{in.scaled_host[static_cast<size_t>(r) * k + c]} *
                                  Bf16ToFloat(FloatToBf16(w_host[static_cast<size_t>(j) * k + c]));
              dot += term, magnitude += std::fabs(term);
            }
            const double scale = in.row_scale[static_cast<size_t>(r)];
            const double want = scale * dot + bias_host[static_cast<size_t>(j)];
            ASSERT_NEAR(got[static_cast<size_t>(r) * n + j], want, 1e-5 * (scale * magnitude + 1.0))
                << "row " << r << " output " << j;
          }
        // kSiluMul reads the same scaled sums: silu(gate) * up of the stored ones.
        for (int r = 0; r < m; ++r)
          for (int j = 0; j < n / 2; ++j) {
            const float gate = got[static_cast<size_t>(r) * n + j], up = got[static_cast<size_t>(r) * n + n / 2 + j];
            const float want = gate / (1.0f + std::exp(-gate)) * up;
            ASSERT_NEAR(got_act[static_cast<size_t>(r) * (n / 2) + j], want, 1e-5 * (1.0 + std::fabs(want)))
                << "row " << r << " column " << j;
          }
      }
}

TEST(SmallBatchGemmNormTest, RejectsSplitNormsItCannotRun) {
  // Checked before any CUDA call, so this runs without a device too.
  alignas(16) static uint16_t data[256] = {};
  alignas(16) static float floats[256] = {};
  const auto* x = reinterpret_cast<const __nv_bfloat16*>(data);
  auto* out = reinterpret_cast<__nv_bfloat16*>(data);
  const cuda::SmallBatchGemmParams ok{.x = x,
                                      .w = x,
                                      .y = floats,
                                      .m = 1,
                                      .n = 128,
                                      .k = 128,
                                      .epilogue = SmallBatchEpilogue::kAddResidualNorm,
                                      .norm_out = {.weight = floats, .out = out, .sumsq = floats}};
  auto bad = [&](auto change) {
    cuda::SmallBatchGemmParams p = ok;
    change(p);
    return cuda::LaunchSmallBatchGemm(p, nullptr);
  };
  EXPECT_EQ(bad([](auto& p) { p.n = 96; }), cudaErrorInvalidValue);  // a CTA's 64 rows are one sum of squares
  EXPECT_EQ(bad([](auto& p) { p.norm_out.weight = nullptr; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.norm_out.out = nullptr; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.norm_out.sumsq = nullptr; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.out = cuda::LinearOutput::kBf16; }), cudaErrorInvalidValue);  // y is the residual
  EXPECT_EQ(bad([](auto& p) { p.accumulate = true; }), cudaErrorInvalidValue);  // it always adds
  EXPECT_EQ(bad([&](auto& p) { p.y = floats + 1; }), cudaErrorInvalidValue);   // float4 stores
  EXPECT_EQ(bad([&](auto& p) { p.norm_out.out = out + 1; }), cudaErrorInvalidValue);
  auto bad_norm = [&](auto change) {
    cuda::SmallBatchGemmParams p = ok;
    p.epilogue = SmallBatchEpilogue::kStore;
    p.row_norm = {.sumsq = floats, .width = 128};
    change(p);
    return cuda::LaunchSmallBatchGemm(p, nullptr);
  };
  EXPECT_EQ(bad_norm([](auto& p) { p.row_norm.width = 96; }), cudaErrorInvalidValue);  // not whole 64-column parts
  EXPECT_EQ(bad_norm([](auto& p) { p.row_norm.width = 0; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad_norm([](auto& p) { p.row_norm.eps = -1.0f; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad_norm([](auto& p) { p.row_norm.eps = NAN; }), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace ernie::testing
