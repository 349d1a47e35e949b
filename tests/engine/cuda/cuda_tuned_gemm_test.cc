// The lm_head's tuned cuBLASLt GEMM (engine/backend/cuda/tuned_gemm.h)
// against cuBLAS's default (gemm.h) on the same bf16 inputs: whatever
// algorithm tuning keeps for a bucket's rows must compute the same product. Both accumulate in
// float32 over k = 1,024 products of bf16 values; only the order of the sums
// may differ, so the outputs agree to float32 rounding (1e-4 of the largest
// output, far below one bf16 step), not bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/gemm_tuning.h"
#include "engine/backend/cuda/tuned_gemm.h"
#include "tests/engine/cuda/backend_runner.h"
#include "tests/engine/cuda/device_copies.h"
#include "tests/engine/cuda/random_inputs.h"

namespace ernie::testing {
namespace {

// A quarter of ERNIE-4.5's vocabulary (103,424: rows 16-byte aligned, as
// the lm_head's are) and the 0.3b's k.
constexpr int64_t kN = 103'424 / 4;
constexpr int64_t kK = 1024;

struct Inputs {
  cuda::DeviceBuffer<uint16_t> w, x;
  cuda::DeviceBuffer<float> y;
};

Inputs MakeInputs(int64_t max_m) {
  std::mt19937 gen(7);
  return {Upload(RandomBf16(static_cast<size_t>(kN * kK), gen, 0.05f)),
          Upload(RandomBf16(static_cast<size_t>(max_m * kK), gen, 1.0f)), Zeros<float>(static_cast<size_t>(max_m * kN))};
}

// A stream with cuBLAS's default GEMM and a tuned one for [kN, kK] on it.
class CudaTunedGemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    auto gemm = cuda::Gemm::Create(stream_);
    ASSERT_TRUE(gemm.ok()) << gemm.status();
    gemm_.emplace(std::move(*gemm));
    auto tuned = cuda::TunedGemm::Create(stream_, kN, kK);
    ASSERT_TRUE(tuned.ok()) << tuned.status();
    tuned_.emplace(std::move(*tuned));
  }
  void TearDown() override {
    tuned_.reset();
    gemm_.reset();
    if (stream_ != nullptr) {
      EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
    }
  }
  cudaStream_t stream_ = nullptr;
  std::optional<cuda::Gemm> gemm_;
  std::optional<cuda::TunedGemm> tuned_;
};

TEST_F(CudaTunedGemmTest, KeptAlgorithmComputesTheDefaultsProduct) {
  cuda::Gemm& gemm = *gemm_;
  cuda::TunedGemm& tuned = *tuned_;
  Inputs in = MakeInputs(300);
  // The 0.3b's buckets past its small-batch lm_head: 48, 64, 96, 128, 192, 256.
  std::map<int64_t, bool> lt_chosen;
  for (const int64_t bucket : LmHeadTuningBuckets(32, 256)) {
    SCOPED_TRACE(bucket);
    const auto tuning = tuned.Tune(gemm, in.x.data(), bucket, in.w.data(), in.y.data());
    ASSERT_TRUE(tuning.ok()) << tuning.status();
    EXPECT_EQ(tuning->m, bucket);
    EXPECT_GT(tuning->default_us, 0.0);
    EXPECT_GT(tuning->best_us, 0.0);
    EXPECT_LE(tuning->best_us, tuning->default_us);
    if (tuning->lt_chosen) {
      EXPECT_GE(tuning->default_us, cuda::TunedGemm::kMinGain * tuning->best_us);
    }
    lt_chosen[bucket] = tuning->lt_chosen;
  }
  EXPECT_EQ(tuned.Tune(gemm, in.x.data(), 64, in.w.data(), in.y.data()).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // Buckets, rows between them and past the last: only a bucket whose
  // candidate won runs here; every other row count is the caller's default.
  int ran_count = 0;
  for (const int64_t m : {33, 40, 48, 64, 65, 200, 256, 257, 300}) {
    SCOPED_TRACE(m);
    ASSERT_TRUE(gemm.Run(in.x.data(), m, kK, in.w.data(), kN, in.y.data(), cuda::GemmOutput::kF32).ok());
    std::vector<float> want = Download(in.y);
    want.resize(static_cast<size_t>(m * kN));
    ASSERT_EQ(cudaMemset(in.y.data(), 0, in.y.bytes()), cudaSuccess);
    const absl::StatusOr<bool> ran = tuned.Run(in.x.data(), m, in.w.data(), in.y.data());
    ASSERT_TRUE(ran.ok()) << ran.status();
    const auto bucket = lt_chosen.find(m);
    EXPECT_EQ(*ran, bucket != lt_chosen.end() && bucket->second);
    if (!*ran) continue;
    ++ran_count;
    std::vector<float> got = Download(in.y);
    float scale = 0;
    for (float v : want) scale = std::max(scale, std::fabs(v));
    ASSERT_GT(scale, 0.0f);
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(double{got[i]} - want[i]) / scale);
    EXPECT_LT(worst, 1e-4) << "largest difference relative to the largest output";
    // Rows past m are not written.
    EXPECT_TRUE(std::all_of(got.begin() + static_cast<int64_t>(want.size()), got.end(), [](float v) { return v == 0; }));
  }
  // Not a test of which algorithm wins (that is the card's), but say so.
  int kept = 0;
  for (const auto& [bucket, chosen] : lt_chosen) kept += chosen ? 1 : 0;
  std::printf("tuned GEMM: cuBLASLt kept at %d of %zu buckets; ran at %d of 9 row counts\n", kept, lt_chosen.size(),
              ran_count);
}

TEST_F(CudaTunedGemmTest, RefusesToTuneDuringCaptureAndBadShapes) {
  EXPECT_EQ(cuda::TunedGemm::Create(nullptr, 0, kK).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::TunedGemm::Create(nullptr, kN, -1).status().code(), absl::StatusCode::kInvalidArgument);
  cuda::Gemm& gemm = *gemm_;
  cuda::TunedGemm& tuned = *tuned_;
  cudaStream_t stream = stream_;
  Inputs in = MakeInputs(64);
  EXPECT_EQ(tuned.Tune(gemm, in.x.data(), 0, in.w.data(), in.y.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const auto during = tuned.Tune(gemm, in.x.data(), 64, in.w.data(), in.y.data());
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  if (graph != nullptr) cudaGraphDestroy(graph);
  EXPECT_EQ(during.status().code(), absl::StatusCode::kFailedPrecondition) << during.status();
  const absl::StatusOr<bool> ran = tuned.Run(in.x.data(), 64, in.w.data(), in.y.data());
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_FALSE(*ran) << "nothing was tuned";
}

}  // namespace
}  // namespace ernie::testing
