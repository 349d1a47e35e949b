// The CUDA backend's batching contract, against the CPU reference doing the
// same steps: a mixed step (a decode, a chunked prefill over its cached
// prefix, a sequence whose table starts with another's cached blocks) gives
// the CPU's logits; forks through CopyBlocks continue like the CPU's; bad
// batches and copies are refused; without a device the factory says so.
#include <gtest/gtest.h>

#include <numeric>

#include "engine/backend/cuda/kernels/decode_linear.h"
#include "tests/engine/cuda/backend_runner.h"

namespace ernie::testing {
namespace {

constexpr double kBound = 0.027;  // per-row relative L2, as in cuda_backend_parity_test.cc

class CudaBatchingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
    auto m = LoadModel(TestDataDir() + "/dense_reference/gqa4_bf16_bias_untied_v515");
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    auto c = cpu::CpuBackend::Create(*model_, {.num_threads = 2, .block_size = 4, .num_blocks = 64, .max_tokens_per_step = 96});
    ASSERT_TRUE(c.ok()) << c.status();
    cpu_ = std::move(*c);
    auto g = CreateCudaBackend(*model_, GpuOptions());
    ASSERT_TRUE(g.ok()) << g.status();
    gpu_ = std::move(*g);
    vocab_ = cpu_->vocab_size();
  }

  // `on` gives gpu_'s logits bit for bit: teacher-forced prefill chunks of 1
  // and 3 tokens, then a decode step of three sequences.
  void ExpectSameLogitsAsGpu(CudaBackend& on) {
    const auto prompt = Prompt(70, 8);
    for (int32_t chunk : {1, 3}) {
      const auto table = ConsecutiveBlocks(70, 4, chunk == 1 ? 0 : 20);
      const auto off_logits = TeacherForced(*gpu_, prompt, 0, chunk, table);
      const auto on_logits = TeacherForced(on, prompt, 0, chunk, table);
      ASSERT_EQ(on_logits.size(), off_logits.size());
      for (size_t i = 0; i < on_logits.size(); ++i)
        ASSERT_EQ(on_logits[i], off_logits[i]) << "chunk " << chunk << ", logit " << i;
    }
    const auto a = Prompt(40, 5), b = Prompt(7, 6), c = Prompt(21, 7);
    const auto table_a = ConsecutiveBlocks(40, 4, 40);
    const std::vector<int32_t> table_b = {60, 61}, table_c = {50, 51, 52, 53, 54, 55};
    std::vector<float> off_logits(3 * static_cast<size_t>(vocab_)), on_logits(off_logits.size(), std::nanf(""));
    for (CudaBackend* be : {gpu_.get(), &on}) {
      TeacherForced(*be, std::span(a).first(39), 0, 39, table_a);
      TeacherForced(*be, std::span(b).first(6), 0, 6, table_b);
      TeacherForced(*be, std::span(c).first(20), 0, 20, table_c);
      const std::vector<int32_t> tokens = {a[39], b[6], c[20]}, pos = {39, 6, 20}, rows = {0, 1, 2};
      const SequenceSlice seqs[] = {{0, 1, 39, table_a}, {1, 1, 6, table_b}, {2, 1, 20, table_c}};
      ASSERT_TRUE(be->Forward({tokens, pos, seqs, rows}, be == gpu_.get() ? off_logits : on_logits).ok());
    }
    for (size_t i = 0; i < on_logits.size(); ++i)
      ASSERT_EQ(on_logits[i], off_logits[i]) << "three sequences, logit " << i;
  }

  // gpu_'s: fused decode kernels up to 8 tokens a step (the default stops
  // at 1, where they stop paying): multi-sequence decode steps below run
  // them. Attention split by the item count however short the context (the
  // default runs these tests' short contexts unsplit), so split-KV runs.
  static CudaBackendOptions GpuOptions() {
    return {.block_size = 4,
            .num_blocks = 64,
            .max_tokens_per_step = 96,
            .max_logit_rows = 5,
            .unsplit_attention_max_context = 0,
            .fused_decode_max_rows = cuda::kDecodeLinearMaxRows,
            .kv_prefetch_max_seqs = 0};  // the prefetch test's before
  }

  std::vector<int32_t> Prompt(int n, int salt) const {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) p[static_cast<size_t>(i)] = 3 + (i * 37 + salt * 11) % static_cast<int>(vocab_ - 3);
    return p;
  }

  // Runs the same step on both backends and compares every logit row.
  void ExpectSameStep(const StepBatch& batch) {
    const size_t n = batch.logit_token_indices.size() * static_cast<size_t>(vocab_);
    std::vector<float> ref(n), got(n, std::nanf(""));
    ASSERT_TRUE(cpu_->Forward(batch, ref).ok());
    const absl::Status s = gpu_->Forward(batch, got);
    ASSERT_TRUE(s.ok()) << s;
    for (size_t r = 0; r < batch.logit_token_indices.size(); ++r)
      EXPECT_LE(RelativeL2(got.data() + r * vocab_, ref.data() + r * vocab_, vocab_), kBound) << "logit row " << r;
  }

  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<cpu::CpuBackend> cpu_;
  std::unique_ptr<CudaBackend> gpu_;
  int64_t vocab_ = 0;
};

TEST_F(CudaBatchingTest, MixedStepMatchesTheCpu) {
  // Before the step: A has 10 tokens cached in blocks {5, 9, 2}; B has the
  // first 9 of its 30-token prompt cached in {7, 1, 3}; C shares A's first
  // two blocks (8 tokens) as a prefix hit.
  const auto a = Prompt(11, 1), b = Prompt(30, 2);
  std::vector<int32_t> c = Prompt(14, 3);
  std::copy(a.begin(), a.begin() + 8, c.begin());
  const std::vector<int32_t> table_a = {5, 9, 2}, table_b = {7, 1, 3, 11, 12, 13, 14, 15}, table_c = {5, 9, 20, 21};
  for (Backend* be : {static_cast<Backend*>(cpu_.get()), static_cast<Backend*>(gpu_.get())}) {
    TeacherForced(*be, std::span(a).first(10), 0, 10, table_a);
    TeacherForced(*be, std::span(b).first(9), 0, 9, table_b);
  }
  // The step: A decodes its 11th token, B prefills 21 more tokens from 9, C
  // computes its 6 tokens after the shared 8.
  std::vector<int32_t> tokens = {a[10]}, pos = {10};
  tokens.insert(tokens.end(), b.begin() + 9, b.end());
  for (int i = 9; i < 30; ++i) pos.push_back(i);
  tokens.insert(tokens.end(), c.begin() + 8, c.end());
  for (int i = 8; i < 14; ++i) pos.push_back(i);
  const SequenceSlice seqs[] = {{0, 1, 10, table_a}, {1, 21, 9, table_b}, {22, 6, 8, table_c}};
  std::vector<int32_t> rows(tokens.size());  // every row: more than max_logit_rows, so lm_head runs in passes
  std::iota(rows.begin(), rows.end(), 0);
  ExpectSameStep({tokens, pos, seqs, rows});
}

TEST_F(CudaBatchingTest, ForkedSequencesContinueLikeTheCpu) {
  // A 10-token prompt in blocks {0, 1, 2} (block 2 holds 2 rows); a fork
  // copies block 2 into block 7 and both branches decode different tokens.
  const auto p = Prompt(10, 4);
  const std::vector<int32_t> parent = {0, 1, 2}, child = {0, 1, 7};
  const BlockCopyOp copy{.src_block = 2, .dst_block = 7, .num_tokens = 2};
  for (Backend* be : {static_cast<Backend*>(cpu_.get()), static_cast<Backend*>(gpu_.get())}) {
    TeacherForced(*be, p, 0, 10, parent);
    ASSERT_TRUE(be->CopyBlocks({&copy, 1}).ok());
  }
  const std::vector<int32_t> tokens = {17, 23}, pos = {10, 10};
  const SequenceSlice seqs[] = {{0, 1, 10, parent}, {1, 1, 10, child}};
  const int32_t rows[] = {0, 1};
  ExpectSameStep({tokens, pos, seqs, rows});
}

// A decode step of three sequences at different positions (three tokens: the
// fused decode kernels), one of them sharing another's cached prefix blocks.
TEST_F(CudaBatchingTest, DecodeStepOfSeveralSequencesMatchesTheCpu) {
  const auto a = Prompt(40, 5), b = Prompt(7, 6);
  std::vector<int32_t> c = Prompt(21, 7);
  std::copy(a.begin(), a.begin() + 16, c.begin());
  const auto table_a = ConsecutiveBlocks(40, 4, 0);                        // blocks 0..9
  const std::vector<int32_t> table_b = {30, 31};
  std::vector<int32_t> table_c(table_a.begin(), table_a.begin() + 4);      // a's first 16 tokens
  for (int32_t blk : {40, 41}) table_c.push_back(blk);
  for (Backend* be : {static_cast<Backend*>(cpu_.get()), static_cast<Backend*>(gpu_.get())}) {
    TeacherForced(*be, std::span(a).first(39), 0, 39, table_a);
    TeacherForced(*be, std::span(b).first(6), 0, 6, table_b);
    TeacherForced(*be, std::span(c).subspan(16, 4), 16, 4, table_c);
  }
  const std::vector<int32_t> tokens = {a[39], b[6], c[20]}, pos = {39, 6, 20}, rows = {2, 0, 1};
  const SequenceSlice seqs[] = {{0, 1, 39, table_a}, {1, 1, 6, table_b}, {2, 1, 20, table_c}};
  ExpectSameStep({tokens, pos, seqs, rows});
}

// The q|k|v launch asking the L2 for the attention's earlier keys
// (kv_prefetch_max_seqs) changes no logit: one sequence decoding (and
// computing 3-token chunks, which take it too), then a decode step of three
// sequences whose key ranges the launch's CTAs share out.
TEST_F(CudaBatchingTest, KeyPrefetchChangesNoLogit) {
  CudaBackendOptions prefetching = GpuOptions();
  prefetching.kv_prefetch_max_seqs = 8;
  auto on = CreateCudaBackend(*model_, prefetching);
  ASSERT_TRUE(on.ok()) << on.status();
  ExpectSameLogitsAsGpu(**on);
}

// Keys and values read with an L2 evict_first policy
// (CudaBackendOptions::stream_kv_min_items; gpu_ keeps the default 16, more
// items than any step here; prefill chunks never stream) are a cache policy:
// the same logits bit for bit, on one-token steps and a three-sequence decode.
TEST_F(CudaBatchingTest, StreamedKvChangesNoLogit) {
  CudaBackendOptions streaming = GpuOptions();
  streaming.stream_kv_min_items = 1;
  auto on = CreateCudaBackend(*model_, streaming);
  ASSERT_TRUE(on.ok()) << on.status();
  ExpectSameLogitsAsGpu(**on);
}

// Backend::WarmUp captures a decode graph for every batch size (two for
// those whose attention splits: short contexts run unsplit); a later decode
// step of such a size replays one, captures nothing, and still matches the CPU.
TEST_F(CudaBatchingTest, WarmUpCapturesDecodeGraphsThatLaterStepsReplay) {
  auto w = CreateCudaBackend(*model_, {.block_size = 4,
                                       .num_blocks = 64,
                                       .max_tokens_per_step = 96,
                                       .max_logit_rows = 5,
                                       .max_graphs = 32,
                                       .unsplit_attention_max_context = 64});
  ASSERT_TRUE(w.ok()) << w.status();
  auto warmed = (*w)->WarmUp(/*max_sequences=*/8);  // max_logit_rows bounds it to batches of 1 - 5
  ASSERT_TRUE(warmed.ok()) << warmed.status();
  EXPECT_GE(*warmed, 5);
  EXPECT_LE(*warmed, 10);
  const BackendStepCounters after_warmup = (*w)->step_counters();
  EXPECT_EQ(after_warmup.graph_captures, *warmed);

  const auto a = Prompt(20, 8), b = Prompt(9, 9), c = Prompt(33, 10);
  const auto table_a = ConsecutiveBlocks(20, 4, 0), table_b = ConsecutiveBlocks(9, 4, 10),
             table_c = ConsecutiveBlocks(33, 4, 20);
  for (Backend* be : {static_cast<Backend*>(cpu_.get()), static_cast<Backend*>(w->get())}) {
    TeacherForced(*be, std::span(a).first(19), 0, 19, table_a);
    TeacherForced(*be, std::span(b).first(8), 0, 8, table_b);
    TeacherForced(*be, std::span(c).first(32), 0, 32, table_c);
  }
  const BackendStepCounters before_decode = (*w)->step_counters();
  const std::vector<int32_t> tokens = {a[19], b[8], c[32]}, pos = {19, 8, 32}, rows = {0, 1, 2};
  const SequenceSlice seqs[] = {{0, 1, 19, table_a}, {1, 1, 8, table_b}, {2, 1, 32, table_c}};
  const StepBatch batch{tokens, pos, seqs, rows};
  std::vector<float> ref(3 * static_cast<size_t>(vocab_)), got(ref.size(), std::nanf(""));
  ASSERT_TRUE(cpu_->Forward(batch, ref).ok());
  ASSERT_TRUE((*w)->Forward(batch, got).ok());
  for (size_t r = 0; r < 3; ++r)
    EXPECT_LE(RelativeL2(got.data() + r * vocab_, ref.data() + r * vocab_, vocab_), kBound) << "logit row " << r;
  const BackendStepCounters after_decode = (*w)->step_counters();
  EXPECT_EQ(after_decode.graph_captures, before_decode.graph_captures);
  EXPECT_EQ(after_decode.graph_replays, before_decode.graph_replays + 1);
}

// Split-KV attention (a lone sequence's context cut over many CTAs, then
// merged) against the same backend with splitting off and against the CPU:
// chunks of 1 (decodes: 2 attention items' worth of heads, so 32 splits, most
// of them empty while the context is short) and of 3 (multi-token items).
// A third backend runs contexts up to 64 keys unsplit and longer ones split,
// so one sequence crosses from one graph key to the other; a fourth runs
// its decodes (contexts up to 150 keys) on the wide decode attention kernel.
TEST_F(CudaBatchingTest, SplitKvAttentionMatchesUnsplitAndTheCpu) {
  auto u = CreateCudaBackend(*model_, {.block_size = 4,
                                       .num_blocks = 64,
                                       .max_tokens_per_step = 96,
                                       .max_logit_rows = 5,
                                       .max_attention_splits = 1,
                                       .fused_decode_max_rows = cuda::kDecodeLinearMaxRows});  // as gpu_
  ASSERT_TRUE(u.ok()) << u.status();
  auto crossing = CreateCudaBackend(*model_, {.block_size = 4,
                                              .num_blocks = 64,
                                              .max_tokens_per_step = 96,
                                              .max_logit_rows = 5,
                                              .unsplit_attention_max_context = 64,
                                              .unsplit_attention_min_pairs = 1,
                                              .fused_decode_max_rows = cuda::kDecodeLinearMaxRows});
  ASSERT_TRUE(crossing.ok()) << crossing.status();
  auto wide = CreateCudaBackend(*model_, {.block_size = 4,
                                          .num_blocks = 64,
                                          .max_tokens_per_step = 96,
                                          .max_logit_rows = 5,
                                          .wide_decode_attention_max_pairs = 64,
                                          .fused_decode_max_rows = cuda::kDecodeLinearMaxRows});
  ASSERT_TRUE(wide.ok()) << wide.status();
  const auto prompt = Prompt(150, 4);
  const auto table = ConsecutiveBlocks(150, 4, 3);
  for (int32_t chunk : {1, 3}) {
    const auto split = TeacherForced(*gpu_, prompt, 0, chunk, table);
    const auto unsplit = TeacherForced(**u, prompt, 0, chunk, table);
    const auto crossed = TeacherForced(**crossing, prompt, 0, chunk, table);
    const auto widened = TeacherForced(**wide, prompt, 0, chunk, table);
    const auto ref = TeacherForced(*cpu_, prompt, 0, chunk, table);
    for (size_t t = 0; t < prompt.size(); ++t) {
      const size_t at = t * static_cast<size_t>(vocab_);
      // Same bf16 inputs, float32 sums in another order: far below bf16's own error.
      EXPECT_LE(RelativeL2(split.data() + at, unsplit.data() + at, vocab_), 2e-3) << "chunk " << chunk << " position " << t;
      EXPECT_LE(RelativeL2(crossed.data() + at, unsplit.data() + at, vocab_), 2e-3)
          << "chunk " << chunk << " position " << t << " (unsplit up to 64 keys)";
      EXPECT_LE(RelativeL2(widened.data() + at, unsplit.data() + at, vocab_), 2e-3)
          << "chunk " << chunk << " position " << t << " (wide decode attention)";
      EXPECT_LE(RelativeL2(split.data() + at, ref.data() + at, vocab_), kBound) << "chunk " << chunk << " position " << t;
    }
  }
  EXPECT_FALSE(CreateCudaBackend(*model_, {.block_size = 4, .num_blocks = 64, .max_attention_splits = 0}).ok());
  EXPECT_FALSE(CreateCudaBackend(*model_, {.block_size = 4, .num_blocks = 64, .max_attention_splits = 33}).ok());
}

TEST_F(CudaBatchingTest, MalformedStepsAndCopiesAreRefused) {
  const auto p = Prompt(5, 5);
  const std::vector<int32_t> pos = {0, 1, 2, 3, 4}, bad_table = {1, 64};
  SequenceSlice seq{0, 5, 0, bad_table};
  const int32_t last = 4;
  std::vector<float> logits(static_cast<size_t>(vocab_));
  absl::Status s = gpu_->Forward({p, pos, {&seq, 1}, {&last, 1}}, logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("outside the pool"), std::string::npos) << s;
  std::vector<int32_t> many(97, 3), many_pos(97);
  std::iota(many_pos.begin(), many_pos.end(), 0);
  const auto big_table = ConsecutiveBlocks(97, 4);
  const SequenceSlice big{0, 97, 0, big_table};
  s = gpu_->Forward({many, many_pos, {&big, 1}, {}}, logits);
  EXPECT_NE(std::string(s.message()).find("sized for 96"), std::string::npos) << s;
  const BlockCopyOp bad_copy{.src_block = 0, .dst_block = 64, .num_tokens = 1};
  EXPECT_EQ(gpu_->CopyBlocks({&bad_copy, 1}).code(), absl::StatusCode::kInvalidArgument);
  // The backend still works after refusals.
  const std::vector<int32_t> table = {1, 2};
  seq.block_table = table;
  EXPECT_TRUE(gpu_->Forward({p, pos, {&seq, 1}, {&last, 1}}, logits).ok());
}

// Options the backend refuses at start: InvalidArgument naming `field`.
void ExpectRefused(const LoadedModel& model, const CudaBackendOptions& options, const std::string& field) {
  const auto b = CreateCudaBackend(model, options);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_NE(std::string(b.status().message()).find(field), std::string::npos) << b.status();
}

TEST(CudaBackendStartTest, BadOptionsAndMissingDevicesAreClearErrors) {
  auto m = LoadModel(TestDataDir() + "/dense_reference/gqa1_f32_tied_v97");
  ASSERT_TRUE(m.ok()) << m.status();
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 0}, "num_blocks");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .moe_grouped_gemm_min_rows = 12}, "moe_grouped_gemm_min_rows");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .unsplit_attention_max_context = -1},
                "unsplit_attention_max_context");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .unsplit_attention_min_pairs = 0},
                "unsplit_attention_min_pairs");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .wide_decode_attention_max_pairs = -2},
                "wide_decode_attention_max_pairs");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .stream_kv_min_items = -1}, "stream_kv_min_items");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .small_batch_gemm_max_rows = 257},
                "small_batch_gemm_max_rows");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .awq_tiled_gemm_max_rows = 4097}, "awq_tiled_gemm_max_rows");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .awq_small_batch_gemm_max_rows = 257},
                "awq_small_batch_gemm_max_rows");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .awq_small_batch_gemm_min_rows = 0},
                "awq_small_batch_gemm_min_rows");
  for (const int rows : {-2, 257})
    ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .small_batch_lm_head_max_rows = rows},
                  "small_batch_lm_head_max_rows");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .awq_tiled_gemm_tile_rows = 8}, "awq_tiled_gemm_tile_rows");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .moe_awq_gemv_k_slices = 3}, "moe_awq_gemv_k_slices");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .moe_awq_gemv_k_slices = 2, .moe_awq_gemv_cta_warps = 3},
                "moe_awq_gemv_cta_warps");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .moe_early_shared_experts = 4}, "moe_early_shared_experts");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .kv_prefetch_max_seqs = -1}, "kv_prefetch_max_seqs");
  for (const int cluster : {-2, 0, 3, 32})
    ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .moe_router_record_cluster = cluster},
                  "moe_router_record_cluster");
  // 2^25 tokens a block x 4 KV heads x 16 dims: past the attention kernels' 32-bit in-block offsets.
  ExpectRefused(**m, {.block_size = int64_t{1} << 25, .num_blocks = 4}, "block_size x num_kv_heads x head_dim");
  ExpectRefused(**m, {.block_size = 16, .num_blocks = 4, .fused_decode_max_rows = 9}, "fused_decode_max_rows");
  auto b = CreateCudaBackend(**m, {.device = 64, .block_size = 16, .num_blocks = 4});
  ASSERT_FALSE(b.ok());
  if (CudaDeviceCount() == 0) {
    EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(std::string(b.status().message()).find("no CUDA device"), std::string::npos) << b.status();
  } else {
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(b.status().message()).find("device 64"), std::string::npos) << b.status();
  }
}

TEST(CudaBackendStartTest, OutOfMemoryAtStartIsResourceExhausted) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  auto m = LoadModel(TestDataDir() + "/dense_reference/gqa1_f32_tied_v97");
  ASSERT_TRUE(m.ok()) << m.status();
  // 2^26 blocks x 16 tokens x (2 layers x 4 heads x 16 dims x 2 x 2 bytes) = 512 GiB of KV cache.
  auto b = CreateCudaBackend(**m, {.block_size = 16, .num_blocks = int64_t{1} << 26});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted) << b.status();
  EXPECT_NE(std::string(b.status().message()).find("KV cache"), std::string::npos) << b.status();
}

}  // namespace
}  // namespace ernie::testing
