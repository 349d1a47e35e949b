// The CPU backend's batching contract: a step mixing several sequences
// (prefill chunks and decodes) gives each the logits it would get alone, and
// a sequence whose block table starts with another's cached blocks computes
// only its suffix yet gets the same logits (prefix reuse).
#include "engine/backend/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <numeric>

namespace ernie::cpu {
namespace {

class CpuBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = LoadModel(std::string(ERNIE_TEST_DATA_DIR) + "/dense_reference/gqa4_bf16_bias_untied_v515");
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    auto b = CpuBackend::Create(*model_, {.num_threads = 2, .block_size = 4, .num_blocks = 64, .max_tokens_per_step = 96});
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = std::move(*b);
    vocab_ = backend_->vocab_size();
  }

  std::vector<int32_t> Prompt(int n, int salt) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) p[static_cast<size_t>(i)] = 3 + (i * 37 + salt * 11) % static_cast<int>(vocab_ - 3);
    return p;
  }

  // Runs `tokens` as one sequence (cached prefix already in `table`) and returns last-token logits.
  std::vector<float> RunAlone(std::span<const int32_t> tokens, int cached, std::span<const int32_t> table) {
    std::vector<int32_t> pos(tokens.size());
    std::iota(pos.begin(), pos.end(), cached);
    SequenceSlice seq{0, static_cast<int32_t>(tokens.size()), cached, table};
    const int32_t last = static_cast<int32_t>(tokens.size() - 1);
    StepBatch batch{tokens, pos, {&seq, 1}, {&last, 1}};
    std::vector<float> logits(static_cast<size_t>(vocab_));
    EXPECT_TRUE(backend_->Forward(batch, logits).ok());
    return logits;
  }

  static double MaxAbsDiff(const std::vector<float>& a, const float* b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, static_cast<double>(std::abs(a[i] - b[i])));
    return m;
  }

  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<CpuBackend> backend_;
  int64_t vocab_ = 0;
};

TEST_F(CpuBackendTest, MixedBatchEqualsSequencesAlone) {
  // Sequence A: 10-token prompt prefilled earlier, now decoding its 11th token.
  // Sequence B: a 23-token prompt prefilled in this same step.
  const auto a = Prompt(11, 1), b = Prompt(23, 2);
  const std::vector<int32_t> table_a = {5, 9, 2}, table_b = {7, 1, 3, 11, 12, 13};
  const std::vector<int32_t> table_a_alone = {20, 21, 22}, table_b_alone = {30, 31, 32, 33, 34, 35};
  RunAlone(std::span(a).first(10), 0, table_a_alone);
  const auto ref_a = RunAlone(std::span(a).subspan(10), 10, table_a_alone);
  const auto ref_b = RunAlone(b, 0, table_b_alone);

  RunAlone(std::span(a).first(10), 0, table_a);  // A's prefix into its batch-run blocks
  std::vector<int32_t> tokens = {a[10]};
  tokens.insert(tokens.end(), b.begin(), b.end());
  std::vector<int32_t> pos = {10};
  for (int i = 0; i < 23; ++i) pos.push_back(i);
  const SequenceSlice seqs[] = {{0, 1, 10, table_a}, {1, 23, 0, table_b}};
  const int32_t rows[] = {0, 23};
  std::vector<float> logits(2 * static_cast<size_t>(vocab_));
  ASSERT_TRUE(backend_->Forward({tokens, pos, seqs, rows}, logits).ok());
  EXPECT_LT(MaxAbsDiff(ref_a, logits.data()), 1e-5);
  EXPECT_LT(MaxAbsDiff(ref_b, logits.data() + vocab_), 1e-5);
}

TEST_F(CpuBackendTest, SharedPrefixBlocksGiveTheSameLogits) {
  auto p = Prompt(19, 3);
  const std::vector<int32_t> table = {40, 41, 42, 43, 44};
  const auto full = RunAlone(p, 0, table);
  // A second sequence reuses blocks 40-43 (16 cached tokens) and computes 3 tokens into block 50.
  const std::vector<int32_t> shared = {40, 41, 42, 43, 50};
  const auto reused = RunAlone(std::span(p).subspan(16), 16, shared);
  EXPECT_LT(MaxAbsDiff(full, reused.data()), 1e-5);
}

TEST_F(CpuBackendTest, MalformedBatchesAreRefused) {
  const auto p = Prompt(5, 4);
  std::vector<int32_t> pos = {0, 1, 2, 3, 4};
  const std::vector<int32_t> short_table = {1};
  SequenceSlice seq{0, 5, 0, short_table};
  const int32_t last = 4;
  std::vector<float> logits(static_cast<size_t>(vocab_));
  auto s = backend_->Forward({p, pos, {&seq, 1}, {&last, 1}}, logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  const std::vector<int32_t> bad_block = {1, 99};
  seq.block_table = bad_block;
  s = backend_->Forward({p, pos, {&seq, 1}, {&last, 1}}, logits);
  EXPECT_NE(std::string(s.message()).find("outside the pool"), std::string::npos);
  const std::vector<int32_t> ok_table = {1, 2};
  seq.block_table = ok_table;
  std::vector<int32_t> bad_tokens = p;
  bad_tokens[2] = static_cast<int32_t>(vocab_);
  s = backend_->Forward({bad_tokens, pos, {&seq, 1}, {&last, 1}}, logits);
  EXPECT_NE(std::string(s.message()).find("outside the vocabulary"), std::string::npos);
  std::vector<int32_t> too_many(97, 3), many_pos(97);
  std::iota(many_pos.begin(), many_pos.end(), 0);
  std::vector<int32_t> big_table(25);
  std::iota(big_table.begin(), big_table.end(), 0);
  SequenceSlice big{0, 97, 0, big_table};
  s = backend_->Forward({too_many, many_pos, {&big, 1}, {}}, logits);
  EXPECT_NE(std::string(s.message()).find("sized for 96"), std::string::npos);
}

}  // namespace
}  // namespace ernie::cpu

namespace ernie::cpu {
namespace {

// --load-format dummy: config only, no checkpoint; the CPU backend says it
// needs CUDA rather than running on unbound weights. Unknown formats name
// the choices.
TEST(LoadFormatTest, DummyReadsTheConfigOnlyAndTheCpuBackendRefusesIt) {
  const std::string dir = std::string(ERNIE_TEST_DATA_DIR) + "/moe_reference/moe_e8_k3_shared1_bf16";
  auto dummy = LoadModel(dir, "dummy");
  ASSERT_TRUE(dummy.ok()) << dummy.status();
  EXPECT_TRUE((*dummy)->dummy_weights);
  EXPECT_EQ((*dummy)->checkpoint, nullptr);
  EXPECT_EQ((*dummy)->config.moe.num_experts, 8);
  auto backend = CpuBackend::Create(**dummy, {.num_threads = 1, .block_size = 4, .num_blocks = 8});
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.status().message().find("--load-format dummy needs the CUDA backend"), std::string::npos);

  auto real = LoadModel(dir, "safetensors");
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_FALSE((*real)->dummy_weights);
  auto bad = LoadModel(dir, "pt");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'pt' is not one of auto, safetensors, dummy"), std::string::npos);
}

}  // namespace
}  // namespace ernie::cpu
