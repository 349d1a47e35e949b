// The decode attention and o_proj in one launch (CudaBackendOptions::
// attention_o_proj_rows, kernels/mma_attention.h LaunchAttentionOProj)
// against the two launches it replaces and the CPU reference: random
// checkpoints written here (head_dim 128, 64 and 32; 2 and 4 KV heads, so
// clusters of 2 and 4; groups of 4, 8 and 5 query heads; hidden sizes whose
// last row group is partial; with and without biases) and a MoE checkpoint
// from tests/data (its bf16 o_proj is fused before the experts). Each runs
// one token a step through contexts that cross cache blocks at every row
// count a CTA may take; a decode step of three sequences; the same steps
// twice give the same bits (the KV heads' sums are added in a fixed order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/kernels/decode_linear.h"
#include "tests/engine/cuda/backend_runner.h"
#include "tests/engine/cuda/quantized_checkpoints.h"

namespace ernie::testing {
namespace {

constexpr double kCpuBound = 0.027;  // per-row relative L2 against the CPU, as cuda_backend_parity_test.cc
// Against the two launches with the same (wide) attention kernel: only the
// order of o_proj's float sums differs.
constexpr double kSameAttentionBound = 1e-3;

struct Case {
  std::string name;
  make_model::DenseShape shape;  // written here, unless `data` names a tests/data checkpoint
  std::string data;
};

make_model::DenseShape Dense(std::string name, int64_t hidden, int64_t heads, int64_t kv_heads, int64_t head_dim,
                             bool bias) {
  return {.name = std::move(name),
          .hidden_size = hidden,
          .num_hidden_layers = 2,
          .num_attention_heads = heads,
          .num_key_value_heads = kv_heads,
          .head_dim = head_dim,
          .intermediate_size = 256,
          .vocab_size = 1003,
          .max_position_embeddings = 4096,
          .tie_word_embeddings = !bias,
          .use_bias = bias};
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  cases.push_back({"d128_g4_kv2_bias", Dense("aop-128", 256, 8, 2, 128, true), ""});
  // 160 rows: the last group of 64 holds 32; 176: of 64, 48 and of 32, 16.
  cases.push_back({"d64_g8_kv2_h160", Dense("aop-64", 160, 16, 2, 64, false), ""});
  cases.push_back({"d32_g5_kv4_h176_bias", Dense("aop-32", 176, 20, 4, 32, true), ""});
  Case moe;
  moe.name = "moe_e8_k3_shared1_bf16";
  moe.data = "moe_reference/moe_e8_k3_shared1_bf16";
  cases.push_back(moe);
  return cases;
}

class CudaAttentionOProjTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
    std::string path;
    if (GetParam().data.empty()) {
      dir_ = std::make_unique<ScratchDir>("cuda_attention_o_proj");
      const absl::Status written = WriteFloatCheckpoint(GetParam().shape, *dir_ / "model");
      ASSERT_TRUE(written.ok()) << written;
      path = *dir_ / "model";
    } else {
      path = TestDataDir() + "/" + GetParam().data;
    }
    auto m = LoadModel(path);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    auto c = cpu::CpuBackend::Create(*model_, {.num_threads = 2, .block_size = 16, .num_blocks = 48,
                                               .max_tokens_per_step = 64});
    ASSERT_TRUE(c.ok()) << c.status();
    cpu_ = std::move(*c);
    vocab_ = cpu_->vocab_size();
  }

  // rows 0: the two launches. Both run the wide decode attention (so the
  // attention's arithmetic is the same) and the fused decode linears up to
  // 8 sequences.
  std::unique_ptr<CudaBackend> Gpu(int rows, int max_items = 1) {
    auto g = CreateCudaBackend(*model_, {.block_size = 16,
                                         .num_blocks = 48,
                                         .max_tokens_per_step = 64,
                                         .wide_decode_attention_max_pairs = 64,
                                         .fused_decode_max_rows = cuda::kDecodeLinearMaxRows,
                                         .attention_o_proj_rows = rows,
                                         .attention_o_proj_max_items = max_items});
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? std::move(*g) : nullptr;
  }

  std::vector<int32_t> Tokens(int n, int salt) const {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
      t[static_cast<size_t>(i)] = static_cast<int32_t>(3 + (i * 7919 + 13 + salt * 101) % (vocab_ - 3));
    return t;
  }

  std::unique_ptr<ScratchDir> dir_;
  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<cpu::CpuBackend> cpu_;
  int64_t vocab_ = 0;
};

// Contexts 1 - 150, one token a step (10 cache blocks, each step unsplit and
// so fused), at every row count a CTA takes.
TEST_P(CudaAttentionOProjTest, TeacherForcedStepsMatchTheTwoLaunchesAndTheCpu) {
  constexpr int kTokens = 150;
  const auto tokens = Tokens(kTokens, 0);
  const auto table = ConsecutiveBlocks(kTokens, 16, 2);
  auto two_launches = Gpu(0);
  ASSERT_TRUE(two_launches);
  const auto base = TeacherForced(*two_launches, tokens, 0, 1, table);
  const auto ref = TeacherForced(*cpu_, tokens, 0, 64, table);
  EXPECT_EQ(two_launches->step_counters().attention_o_proj_steps, 0);
  for (const int rows : {16, 32, 64}) {
    auto fused = Gpu(rows);
    ASSERT_TRUE(fused);
    const auto got = TeacherForced(*fused, tokens, 0, 1, table);
    EXPECT_EQ(fused->step_counters().attention_o_proj_steps, kTokens) << rows << " rows";
    ASSERT_EQ(got.size(), base.size());
    double worst_base = 0, worst_cpu = 0;
    for (int t = 0; t < kTokens; ++t) {
      const size_t at = static_cast<size_t>(t) * vocab_;
      const double vs_base = RelativeL2(got.data() + at, base.data() + at, vocab_);
      const double vs_cpu = RelativeL2(got.data() + at, ref.data() + at, vocab_);
      worst_base = std::max(worst_base, vs_base);
      worst_cpu = std::max(worst_cpu, vs_cpu);
      ASSERT_LE(vs_base, kSameAttentionBound) << rows << " rows, position " << t;
      ASSERT_LE(vs_cpu, kCpuBound) << rows << " rows, position " << t;
    }
    std::cout << "[ o_proj ] " << GetParam().name << ", " << rows << " rows a CTA: worst relative L2 " << worst_base
              << " against the two launches, " << worst_cpu << " against the CPU\n";
  }
}

// The cluster adds the KV heads' sums in a fixed order: two backends give
// the same bits.
TEST_P(CudaAttentionOProjTest, RepeatsBitForBit) {
  const auto tokens = Tokens(40, 1);
  const auto table = ConsecutiveBlocks(40, 16, 0);
  auto a = Gpu(32), b = Gpu(32);
  ASSERT_TRUE(a && b);
  const auto first = TeacherForced(*a, tokens, 0, 1, table), second = TeacherForced(*b, tokens, 0, 1, table);
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) ASSERT_EQ(first[i], second[i]) << "logit " << i;
}

// A decode step of three sequences (grid z: the item) at max_items 4, and
// the same step at max_items 2, which takes the two launches.
TEST_P(CudaAttentionOProjTest, ThreeSequencesInOneStep) {
  const auto a = Tokens(40, 2), b = Tokens(7, 3), c = Tokens(21, 4);
  const std::vector<int32_t> table_a = {0, 1, 2}, table_b = {5}, table_c = {8, 9};
  std::vector<std::vector<float>> logits;
  for (const int max_items : {4, 2}) {
    auto be = Gpu(16, max_items);
    ASSERT_TRUE(be);
    TeacherForced(*be, std::span(a).first(39), 0, 39, table_a);
    TeacherForced(*be, std::span(b).first(6), 0, 6, table_b);
    TeacherForced(*be, std::span(c).first(20), 0, 20, table_c);
    const int64_t before = be->step_counters().attention_o_proj_steps;
    const std::vector<int32_t> tokens = {a[39], b[6], c[20]}, pos = {39, 6, 20}, rows = {0, 1, 2};
    const SequenceSlice seqs[] = {{0, 1, 39, table_a}, {1, 1, 6, table_b}, {2, 1, 20, table_c}};
    logits.emplace_back(3 * static_cast<size_t>(vocab_), std::nanf(""));
    ASSERT_TRUE(be->Forward({tokens, pos, seqs, rows}, logits.back()).ok());
    EXPECT_EQ(be->step_counters().attention_o_proj_steps - before, max_items >= 3 ? 1 : 0) << max_items;
  }
  for (int r = 0; r < 3; ++r) {
    const size_t at = static_cast<size_t>(r) * vocab_;
    EXPECT_LE(RelativeL2(logits[0].data() + at, logits[1].data() + at, vocab_), kSameAttentionBound) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttentionOProjTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace ernie::testing
