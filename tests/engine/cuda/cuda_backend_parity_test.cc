// The CUDA backend computes the CPU float32 reference's function to bf16
// precision, on every checkpoint in tests/data/dense_reference and
// tests/data/moe_reference (mixtures of experts: 4 to 16 experts, top 2 to
// 6, with and without shared experts, MoE every layer or every other):
// - teacher-forced logits (the prompt followed by Hugging Face's greedy
//   tokens from expected.json), in one step and in chunks over a cached
//   prefix, with two KV block sizes: per-position relative L2 error <= kBound;
// - greedy decoding one token per step gives the CPU's tokens for as long as
//   the CPU's top-1/top-2 logit gap exceeds kTieGap.
//
// (Mixtures of experts: see BoundsFor.)
// kBound is 1.5x the yardstick of issue 7, Hugging Face bf16 against HF
// float32 on the same inputs, measured on the device on the 0.3b shape
// (teacher-forced, 64 tokens): max per-position relative L2 0.018 (median
// 0.016; engine/backend/cuda/NOTES.md). The small checkpoints here have no
// HF bf16 run of their own, so that one measured figure sets the bound.
// Greedy tokens must agree while the CPU's top-1/top-2 gap exceeds both
// kTieGap and what the bound allows an element to move (kTieGapScale x
// kBound x the row's RMS logit): below that, bf16 may legitimately flip the
// choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "engine/backend/cuda/kernels/paged_attention.h"
#include "nlohmann/json.hpp"
#include "engine/backend/cuda/kernels/decode_linear.h"
#include "tests/engine/cuda/backend_runner.h"

namespace ernie::testing {
namespace {

constexpr double kBound = 0.027;    // per-position relative L2 error of the logits: 1.5 x 0.018
constexpr float kTieGap = 1e-2f;    // CPU top-1/top-2 gap under which greedy tokens may differ
constexpr double kTieGapScale = 4;  // ... or under this many bound-sized errors of the row

// The CPU gap under which the two backends may pick different tokens.
double TieGap(const float* cpu_row, int64_t vocab) {
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += static_cast<double>(cpu_row[i]) * cpu_row[i];
  return std::max<double>(kTieGap, kTieGapScale * kBound * std::sqrt(sum / static_cast<double>(vocab)));
}
constexpr int kGreedySteps = 24;

struct Prompt {
  std::vector<int32_t> tokens;  // prompt then HF's greedy continuation
  size_t prompt_len = 0;
};

class CudaParityTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
    dir_ = TestDataDir() + "/" + GetParam();
    auto m = LoadModel(dir_);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    if (!cuda::PagedAttentionSupportsHeadDim(static_cast<int32_t>(model_->config.head_dim)))
      GTEST_SKIP() << GetParam() << ": head_dim " << model_->config.head_dim
                   << " is not one the CUDA attention kernels cover (the backend refuses it at start)";
    std::ifstream in(dir_ + "/expected.json");
    ASSERT_TRUE(in) << dir_;
    const auto expected = nlohmann::json::parse(in);
    for (const auto& p : expected["prompts"]) {
      Prompt prompt;
      prompt.tokens = p["prompt_ids"].get<std::vector<int32_t>>();
      prompt.prompt_len = prompt.tokens.size();
      for (const auto& step : p["steps"]) prompt.tokens.push_back(step["token"].get<int32_t>());
      prompts_.push_back(std::move(prompt));
    }
  }

  std::unique_ptr<cpu::CpuBackend> Cpu(int64_t block_size) {
    auto b = cpu::CpuBackend::Create(
        *model_, {.num_threads = 2, .block_size = block_size, .num_blocks = 512, .max_tokens_per_step = 512});
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? std::move(*b) : nullptr;
  }
  // moe_chunk_tokens below a step's tokens makes MoE layers go in chunks.
  // Chunks of moe_shared_gemm_min_tokens or more run the shared experts as
  // a dense cuBLAS MLP.
  // Routed tiles of moe_grouped_gemm_min_rows slots or more take the grouped
  // GEMM (0: the backend's choice; -1: the grouped GEMV at every tile size).
  std::unique_ptr<CudaBackend> Gpu(int64_t block_size, int64_t moe_chunk_tokens = 1024,
                                   int64_t moe_shared_gemm_min_tokens = 128,
                                   int32_t moe_grouped_gemm_min_rows = 0) {
    auto b = CreateCudaBackend(*model_, {.block_size = block_size,
                                         .num_blocks = 512,
                                         .max_tokens_per_step = 512,
                                         .moe_chunk_tokens = moe_chunk_tokens,
                                         .moe_shared_gemm_min_tokens = moe_shared_gemm_min_tokens,
                                         .moe_grouped_gemm_min_rows = moe_grouped_gemm_min_rows});
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? std::move(*b) : nullptr;
  }

  std::string dir_;
  std::unique_ptr<LoadedModel> model_;
  std::vector<Prompt> prompts_;
};

// Bounds on the per-position errors of one run: their median, 90th
// percentile and maximum.
struct ErrorBounds {
  double median, p90, max;
};

// Dense models: every position within kBound. Mixtures of experts: bf16
// moves a token whose two best experts score within its rounding to the
// other one, and that position's logits move far (Hugging Face's own bf16
// run does the same: up to 0.42 on these checkpoints). So each quantile is
// bounded by 1.5x Hugging Face bf16's same quantile against its float32 on
// the same tokens, measured on the device by tools/reference/bf16_yardstick.py
// into tests/data/moe_reference/yardstick.json (issue 7's yardstick, per
// checkpoint), but for the maximum (below).
ErrorBounds BoundsFor(const std::string& case_path) {
  const auto slash = case_path.find('/');
  const std::string folder = case_path.substr(0, slash), name = case_path.substr(slash + 1);
  if (folder != "moe_reference") return {kBound, kBound, kBound};
  std::ifstream in(TestDataDir() + "/" + folder + "/yardstick.json");
  EXPECT_TRUE(in) << "no " << folder << "/yardstick.json: run tools/reference/bf16_yardstick.py on the device";
  if (!in) return {0, 0, 0};
  const auto hf = nlohmann::json::parse(in)["checkpoints"][name];
  EXPECT_FALSE(hf.is_null()) << name << " is missing from " << folder << "/yardstick.json";
  if (hf.is_null()) return {0, 0, 0};
  // The maximum is one flip's size, which is luck (Hugging Face's own ranges
  // from 0.05 to 0.42 over these checkpoints; ours reached 0.66 on
  // moe_e4_k2_noshared_f32, whose routing picks 2 of only 4 experts): it is
  // held under 1.0, i.e. the flipped position's logits still correlate.
  return {std::max(kBound, 1.5 * hf["median_rel_l2"].get<double>()),
          std::max(kBound, 1.5 * hf["p90_rel_l2"].get<double>()), 1.0};
}

// Checks a run's per-position errors against `bounds`.
void ExpectWithin(std::vector<double> errors, const ErrorBounds& bounds) {
  ASSERT_FALSE(errors.empty());
  std::sort(errors.begin(), errors.end());
  EXPECT_LE(errors[errors.size() / 2], bounds.median) << "median over " << errors.size() << " positions";
  EXPECT_LE(errors[(errors.size() - 1) * 9 / 10], bounds.p90) << "90th percentile";
  EXPECT_LE(errors.back(), bounds.max) << "maximum";
}

TEST_P(CudaParityTest, TeacherForcedLogitsMatchTheCpuReference) {
  auto cpu = Cpu(16);
  ASSERT_NE(cpu, nullptr);
  const int64_t vocab = cpu->vocab_size();
  const ErrorBounds bounds = BoundsFor(GetParam());
  struct Layout {
    int64_t block_size;
    int32_t chunk;
    int64_t moe_chunk_tokens = 1024;
    int64_t moe_shared_gemm_min_tokens = 128;
    int32_t moe_grouped_gemm_min_rows = 0;
  };
  double worst = 0;
  // Chunks of at most 8 tokens run the fused decode kernels; 1 also splits
  // attention over many CTAs. A MoE chunk of 5 tokens splits the expert
  // kernels of a step in passes; MoE steps of 512 tokens take the grouped
  // kernels with their largest tiles. Shared experts take the
  // dense cuBLAS MLP in chunks of 128+ tokens by default, in every chunk
  // (decode steps included) with a threshold of 1, in none with 100000.
  // Routed tiles take the grouped GEMM (bf16: from 8 slots); the last two
  // layouts run it from 16 slots, and never (the grouped GEMV).
  for (const Layout layout :
       {Layout{16, 512}, Layout{3, 7}, Layout{1, 64}, Layout{16, 1}, Layout{16, 64, 5}, Layout{16, 7, 1024, 1},
        Layout{16, 512, 1024, 100000}, Layout{16, 7, 1024, 128, 16}, Layout{16, 512, 1024, 128, -1}}) {
    SCOPED_TRACE(absl::StrCat(GetParam(), " block=", layout.block_size, " chunk=", layout.chunk,
                              " moe_chunk=", layout.moe_chunk_tokens,
                              " moe_shared_gemm_min=", layout.moe_shared_gemm_min_tokens,
                              " moe_grouped_gemm_min_rows=", layout.moe_grouped_gemm_min_rows));
    auto gpu = Gpu(layout.block_size, layout.moe_chunk_tokens, layout.moe_shared_gemm_min_tokens,
                   layout.moe_grouped_gemm_min_rows);
    ASSERT_NE(gpu, nullptr);
    std::vector<double> errors;
    for (const Prompt& p : prompts_) {
      const auto ref = TeacherForced(*cpu, p.tokens, 0, 512, ConsecutiveBlocks(p.tokens.size(), 16));
      const auto got =
          TeacherForced(*gpu, p.tokens, 0, layout.chunk, ConsecutiveBlocks(p.tokens.size(), layout.block_size));
      for (size_t t = 0; t < p.tokens.size(); ++t)
        errors.push_back(RelativeL2(got.data() + t * vocab, ref.data() + t * vocab, vocab));
    }
    worst = std::max(worst, *std::max_element(errors.begin(), errors.end()));
    ExpectWithin(errors, bounds);
  }
  std::cout << "[ yardstick ] " << GetParam() << " max per-position relative L2 of CUDA vs CPU f32 logits: " << worst
            << " (bounds: median " << bounds.median << ", p90 " << bounds.p90 << ", max " << bounds.max << ")\n";
  RecordProperty("max_relative_l2", std::to_string(worst));
}

TEST_P(CudaParityTest, GreedyTokensMatchTheCpuWhileItsChoiceIsClear) {
  auto cpu = Cpu(16);
  auto gpu = Gpu(16);
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(gpu, nullptr);
  const int64_t vocab = cpu->vocab_size();
  int single_token_steps = 0;  // on the GPU, over all prompts
  for (const Prompt& p : prompts_) {
    const std::vector<int32_t> prompt(p.tokens.begin(), p.tokens.begin() + static_cast<ptrdiff_t>(p.prompt_len));
    const auto table = ConsecutiveBlocks(static_cast<int64_t>(prompt.size()) + kGreedySteps, 16);
    const auto cpu_logits = TeacherForced(*cpu, prompt, 0, 512, table);
    const auto gpu_logits = TeacherForced(*gpu, prompt, 0, 512, table);
    const float* cpu_row = cpu_logits.data() + (prompt.size() - 1) * vocab;
    Top2 c = ArgmaxWithGap(cpu_row, vocab);
    Top2 g = ArgmaxWithGap(gpu_logits.data() + (prompt.size() - 1) * vocab, vocab);
    double tie = TieGap(cpu_row, vocab);
    int agreed = 0;
    for (int step = 0; step < kGreedySteps && c.gap > tie; ++step) {
      ASSERT_EQ(g.token, c.token) << GetParam() << " prompt_len=" << prompt.size() << " step " << step
                                  << " (CPU gap " << c.gap << ", tie gap " << tie << ")";
      ++agreed;
      const int32_t cached = static_cast<int32_t>(prompt.size()) + step;
      const std::vector<int32_t> next = {c.token};
      const auto cl = TeacherForced(*cpu, next, cached, 1, table);
      const auto gl = TeacherForced(*gpu, next, cached, 1, table);
      ++single_token_steps;
      c = ArgmaxWithGap(cl.data(), vocab);
      g = ArgmaxWithGap(gl.data(), vocab);
      tie = TieGap(cl.data(), vocab);
    }
    // Single-token steps replay a CUDA graph (captured the second time their
    // shape was seen: graph_admission.h).
    if (single_token_steps >= 2) {
      EXPECT_GE(gpu->step_counters().graph_captures, 1);
    }
    std::cout << "[ greedy ] " << GetParam() << " prompt_len=" << prompt.size() << ": " << agreed
              << " steps agree, then "
              << (agreed == kGreedySteps ? std::string("the end") : absl::StrCat("a CPU gap under the tie gap ", tie))
              << "\n";
  }
}

// Larger shapes than tests/data holds (the 0.3b model's head_dim 128 and 8
// query heads per KV head), made on the device by tools/gpu-test and named
// in $ERNIE_CUDA_EXTRA_MODELS (colon-separated directories): teacher-forced
// logits of 64 pseudo-random tokens, in chunks of 17, against the CPU.
TEST(CudaExtraModelsTest, TeacherForcedLogitsMatchTheCpuReference) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  const char* env = std::getenv("ERNIE_CUDA_EXTRA_MODELS");
  if (env == nullptr || *env == '\0') GTEST_SKIP() << "ERNIE_CUDA_EXTRA_MODELS names no model directories";
  for (absl::string_view dir : absl::StrSplit(env, ':', absl::SkipEmpty())) {
    SCOPED_TRACE(dir);
    auto m = LoadModel(std::string(dir));
    ASSERT_TRUE(m.ok()) << m.status();
    auto cpu = cpu::CpuBackend::Create(**m, {.block_size = 16, .num_blocks = 4, .max_tokens_per_step = 64});
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    const int64_t vocab = (*cpu)->vocab_size();
    std::vector<int32_t> tokens(64);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(3 + (i * 7919 + 13) % (vocab - 3));
    const auto table = ConsecutiveBlocks(64, 16);
    const auto ref = TeacherForced(**cpu, tokens, 0, 64, table);
    double worst = 0;
    // A MoE model here has no Hugging Face run to measure its routing flips
    // by (see BoundsFor): its median and 90th percentile are held to kBound,
    // its maximum only reported.
    const bool moe = (*m)->config.architecture == Architecture::kErnie45Moe;
    const ErrorBounds bounds{kBound, kBound, moe ? 1.0 : kBound};
    // Chunks of 17 (cuBLAS, or with cluster_decode_max_rows the cluster
    // decode kernel where the shapes allow), of 1 and 5 (fused decode
    // kernels, taken here up to 8 tokens a step, and split-KV attention);
    // with small_batch_lm_head_max_rows 64, 17 and 5 logit rows on the
    // small-batch GEMM (0: cuBLAS; the default, -1, takes 17 there too on
    // dense models and none on MoE models).
    struct Variant {
      int cluster_rows;
      int small_batch_lm_head_max_rows;
    };
    for (const Variant v : {Variant{0, 0}, Variant{64, 0}, Variant{0, 64}}) {
      auto gpu = CreateCudaBackend(**m, {.block_size = 16,
                                         .num_blocks = 4,
                                         .max_tokens_per_step = 64,
                                         .fused_decode_max_rows = cuda::kDecodeLinearMaxRows,
                                         .cluster_decode_max_rows = v.cluster_rows,
                                         .small_batch_lm_head_max_rows = v.small_batch_lm_head_max_rows});
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      for (int32_t chunk : {17, 1, 5}) {
        if (v.cluster_rows > 0 && chunk != 17) continue;  // steps of <= 8 tokens never take it
        if (v.small_batch_lm_head_max_rows > 0 && chunk == 1) continue;
        SCOPED_TRACE(absl::StrCat("chunk ", chunk, " cluster_decode_max_rows ", v.cluster_rows,
                                  " small_batch_lm_head_max_rows ", v.small_batch_lm_head_max_rows));
        const auto got = TeacherForced(**gpu, tokens, 0, chunk, table);
        std::vector<double> errors;
        for (size_t t = 0; t < tokens.size(); ++t)
          errors.push_back(RelativeL2(got.data() + t * vocab, ref.data() + t * vocab, vocab));
        worst = std::max(worst, *std::max_element(errors.begin(), errors.end()));
        ExpectWithin(errors, bounds);
      }
    }
    std::cout << "[ yardstick ] " << dir << " max per-position relative L2 of CUDA vs CPU f32 logits: " << worst
              << " (bound " << kBound << ")\n";
  }
}

// Test names: the checkpoint's directory name.
std::string CaseName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param.substr(info.param.find('/') + 1);
}
INSTANTIATE_TEST_SUITE_P(Dense, CudaParityTest, ::testing::ValuesIn(ReferenceCases("dense_reference")), CaseName);
INSTANTIATE_TEST_SUITE_P(Moe, CudaParityTest, ::testing::ValuesIn(ReferenceCases("moe_reference")), CaseName);

}  // namespace
}  // namespace ernie::testing
