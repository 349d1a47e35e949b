// Overlapped steps (EngineConfig::overlap_steps): the engine launches step
// N+1 before it reads step N's tokens, decodes take their input from the
// device's samples (StepBatch::fed_back_tokens), and a sequence that step N
// finishes has its row in step N+1 dropped. On the CPU, HostSamplingBackend
// runs each launch at once (Backend's default launch), so every output must
// equal the plain, one-step-at-a-time path exactly: tokens, logprobs, finish
// reasons, counts, under preemption, stops and aborts.
#include <gtest/gtest.h>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/core/engine_core.h"
#include "tests/engine/core/host_sampling_backend.h"
#include "tests/engine/core/mixed_requests.h"

namespace ernie {
namespace {

class OverlappedStepsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = LoadModel(std::string(ERNIE_TEST_DATA_DIR) + "/dense_reference/gqa2_bf16_untied_v1002");
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    cpu_ = MakeCpu(256);
  }
  std::unique_ptr<cpu::CpuBackend> MakeCpu(int64_t blocks) {
    auto c = cpu::CpuBackend::Create(*model_, {.num_threads = 2, .block_size = 4, .num_blocks = blocks,
                                               .max_tokens_per_step = 24});
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  static void ExpectSameOutputs(const std::map<std::string, Collect>& want,
                                const std::map<std::string, Collect>& got) {
    ASSERT_EQ(want.size(), got.size());
    for (const auto& [id, w] : want) {
      const Collect& g = got.at(id);
      ASSERT_TRUE(w.error.ok() && g.error.ok()) << id << ": " << w.error << " / " << g.error;
      ASSERT_EQ(w.samples.size(), g.samples.size()) << id;
      for (const auto& [index, sample] : w.samples) {
        const auto& other = g.samples.at(index);
        EXPECT_FALSE(sample.tokens.empty()) << id;
        EXPECT_EQ(sample.tokens, other.tokens) << id << " sample " << index;
        EXPECT_EQ(sample.logprobs, other.logprobs) << id << " sample " << index;
        EXPECT_EQ(sample.top, other.top) << id << " sample " << index;
        EXPECT_EQ(sample.finish, other.finish) << id << " sample " << index;
        EXPECT_EQ(sample.completion_tokens, other.completion_tokens) << id << " sample " << index;
      }
    }
  }
  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<cpu::CpuBackend> cpu_;
};

TEST_F(OverlappedStepsTest, EveryRouteGivesThePlainPathsOutputs) {
  const auto plain = RunAll(cpu_.get());
  HostSamplingBackend overlapped(cpu_.get());
  overlapped.overlaps = true;
  const auto got = RunAll(&overlapped);
  ExpectSameOutputs(plain, got);
  // Decodes really took their input from the unread step. Steps with a
  // biased or penalized row are read before the next plan (their edits
  // follow the outputs), and most steps here have one, so the run crosses
  // between the two ways often.
  EXPECT_GT(overlapped.fed_back_tokens, 5);
  // The same backend with overlap_steps off launches nothing.
  HostSamplingBackend off(cpu_.get());
  off.overlaps = true;
  ExpectSameOutputs(plain, RunAll(&off, nullptr, /*overlap_steps=*/false));
  EXPECT_EQ(off.launches, 0);
}

TEST_F(OverlappedStepsTest, PreemptionWhileAStepIsUnread) {
  // A pool too small for every request: the scheduler preempts sequences
  // whose token is still on the device; they are admitted again once it is read.
  auto small = MakeCpu(40);
  int64_t plain_preemptions = 0, overlapped_preemptions = 0;
  const auto plain = RunAll(small.get(), &plain_preemptions);
  HostSamplingBackend overlapped(small.get());
  overlapped.overlaps = true;
  const auto got = RunAll(&overlapped, &overlapped_preemptions);
  EXPECT_GT(overlapped_preemptions, 0);
  EXPECT_GT(overlapped.fed_back_tokens, 10);
  for (const auto& [id, want] : plain) {
    const Collect& g = got.at(id);
    ASSERT_TRUE(want.error.ok() && g.error.ok()) << id << ": " << want.error << " / " << g.error;
    for (const auto& [index, sample] : want.samples) {
      EXPECT_EQ(sample.tokens, g.samples.at(index).tokens) << id << " sample " << index;
      EXPECT_EQ(sample.finish, g.samples.at(index).finish) << id << " sample " << index;
    }
  }
}

// Greedy requests that stop on a token they produce, with the step after
// their stop already launched: the dropped row must change nothing, and
// every block must come back.
TEST_F(OverlappedStepsTest, StopsWithTheNextStepLaunched) {
  auto run = [&](Backend* backend, const std::vector<int32_t>& stops, int64_t* blocks_used) {
    EngineConfig config{.scheduler = {.max_num_seqs = 8, .max_num_batched_tokens = 24}, .max_model_len = 64,
                        .eos_token_ids = {2}};
    auto engine = EngineCore::Create(backend, config);
    EXPECT_TRUE(engine.ok()) << engine.status();
    std::map<std::string, std::shared_ptr<Collect>> sinks;
    for (int i = 0; i < 4; ++i) {
      const std::string id = absl::StrCat("s", i);
      sinks[id] = std::make_shared<Collect>();
      SamplingParams p{.temperature = 0.0f, .max_tokens = 12};
      if (!stops.empty()) p.stop_token_ids = {stops[static_cast<size_t>(i)]};
      std::vector<int32_t> prompt;
      for (int j = 0; j < 6 + i; ++j) prompt.push_back(5 + (j * 13 + i * 29) % 80);
      EXPECT_TRUE((*engine)->AddRequest({.request_id = id, .prompt_token_ids = prompt, .sampling = p,
                                         .sink = sinks[id]}).ok());
    }
    for (int step = 0; step < 200 && (*engine)->Step(); ++step) {
    }
    *blocks_used = (*engine)->Load().kv_blocks_used;
    std::map<std::string, Collect> out;
    for (auto& [id, sink] : sinks) out[id] = *sink;
    return out;
  };
  int64_t used = -1;
  const auto free_run = run(cpu_.get(), {}, &used);
  // Each request stops on its own 3rd..6th token.
  std::vector<int32_t> stops;
  for (int i = 0; i < 4; ++i) stops.push_back(free_run.at(absl::StrCat("s", i)).samples.at(0).tokens.at(2 + i));
  const auto plain = run(cpu_.get(), stops, &used);
  EXPECT_EQ(used, 0);
  HostSamplingBackend overlapped(cpu_.get());
  overlapped.overlaps = true;
  const auto got = run(&overlapped, stops, &used);
  EXPECT_EQ(used, 0);
  ExpectSameOutputs(plain, got);
  for (const auto& [id, c] : got) {
    EXPECT_EQ(c.samples.at(0).finish, FinishReason::kStop) << id;
    EXPECT_LE(c.samples.at(0).tokens.size(), 6u) << id;
  }
  EXPECT_GT(overlapped.fed_back_tokens, 8);
}

TEST_F(OverlappedStepsTest, AbortsAtEveryStepFreeEverything) {
  // Abort one request after k steps, for every k: the others' outputs stay
  // the plain path's, and the pool ends empty.
  auto run = [&](Backend* backend, int abort_after, int64_t* blocks_used) {
    EngineConfig config{.scheduler = {.max_num_seqs = 8, .max_num_batched_tokens = 24}, .max_model_len = 64,
                        .eos_token_ids = {2}};
    auto engine = EngineCore::Create(backend, config);
    EXPECT_TRUE(engine.ok()) << engine.status();
    std::map<std::string, std::shared_ptr<Collect>> sinks;
    for (int i = 0; i < 3; ++i) {
      const std::string id = absl::StrCat("a", i);
      sinks[id] = std::make_shared<Collect>();
      SamplingParams p{.temperature = 0.8f, .seed = 3 + static_cast<uint64_t>(i), .ignore_eos = true,
                       .max_tokens = 10, .n = i + 1};
      std::vector<int32_t> prompt;
      for (int j = 0; j < 7 + 2 * i; ++j) prompt.push_back(4 + (j * 17 + i * 5) % 70);
      EXPECT_TRUE((*engine)->AddRequest({.request_id = id, .prompt_token_ids = prompt, .sampling = p,
                                         .sink = sinks[id]}).ok());
    }
    for (int step = 0; step < 200; ++step) {
      if (step == abort_after) {
        EXPECT_TRUE((*engine)->Abort("a2")) << "a2 ended before step " << abort_after;
      }
      if (!(*engine)->Step()) break;
    }
    *blocks_used = (*engine)->Load().kv_blocks_used;
    EXPECT_FALSE((*engine)->HasWork());
    std::map<std::string, Collect> out;
    for (auto& [id, sink] : sinks) out[id] = *sink;
    return out;
  };
  int64_t used = -1;
  for (int k = 0; k < 10; ++k) {
    const auto plain = run(cpu_.get(), k, &used);
    EXPECT_EQ(used, 0) << k;
    HostSamplingBackend overlapped(cpu_.get());
    overlapped.overlaps = true;
    const auto got = run(&overlapped, k, &used);
    EXPECT_EQ(used, 0) << k;
    for (const std::string id : {"a0", "a1"})
      for (const auto& [index, sample] : plain.at(id).samples) {
        EXPECT_EQ(sample.tokens, got.at(id).samples.at(index).tokens) << id << " abort after " << k;
        EXPECT_EQ(sample.finish, FinishReason::kLength);
      }
    for (const auto& [index, sample] : got.at("a2").samples) EXPECT_EQ(sample.finish, FinishReason::kAbort) << k;
  }
}

TEST(BackendLaunchTest, DefaultLaunchQueuesResultsAndChecksFedBackTokens) {
  auto m = LoadModel(std::string(ERNIE_TEST_DATA_DIR) + "/dense_reference/gqa2_bf16_untied_v1002");
  ASSERT_TRUE(m.ok()) << m.status();
  auto c = cpu::CpuBackend::Create(**m, {.num_threads = 1, .block_size = 4, .num_blocks = 8, .max_tokens_per_step = 8});
  ASSERT_TRUE(c.ok()) << c.status();
  HostSamplingBackend backend(c->get());
  SampledToken out[2];
  EXPECT_EQ(backend.WaitForSamples({out, 1}).code(), absl::StatusCode::kFailedPrecondition);

  // Step 1: a 3-token prompt, one greedy row.
  const SamplingParams greedy{.temperature = 0.0f};
  const int32_t ids[] = {5, 6, 7}, pos[] = {0, 1, 2}, table[] = {0}, rows[] = {2};
  const SequenceSlice seq{0, 3, 0, table};
  const DeviceSampleRow row{.logit_row = 0, .params = &greedy};
  ASSERT_TRUE(backend.LaunchForwardAndSample({ids, pos, {&seq, 1}, rows}, {.rows = {&row, 1}}).ok());

  // Step 2 feeds back row 0's token: the launch fills it in.
  const int32_t next_ids[] = {0}, next_pos[] = {3}, next_rows[] = {0};
  const SequenceSlice next{0, 1, 3, table};
  const FedBackToken fed[] = {{.token_index = 0, .sample_row = 0}};
  const FedBackToken past_rows[] = {{.token_index = 0, .sample_row = 1}};
  const FedBackToken past_tokens[] = {{.token_index = 1, .sample_row = 0}};
  EXPECT_EQ(backend.LaunchForwardAndSample({next_ids, next_pos, {&next, 1}, next_rows, past_rows}, {.rows = {&row, 1}})
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend.LaunchForwardAndSample({next_ids, next_pos, {&next, 1}, next_rows, past_tokens},
                                           {.rows = {&row, 1}})
                .code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(backend.LaunchForwardAndSample({next_ids, next_pos, {&next, 1}, next_rows, fed}, {.rows = {&row, 1}}).ok());
  // Results come back in launch order, and a wait must have room for them.
  EXPECT_EQ(backend.WaitForSamples({out, 2}).code(), absl::StatusCode::kInvalidArgument);  // consumed step 1
  SampledToken second;
  ASSERT_TRUE(backend.WaitForSamples({&second, 1}).ok());
  EXPECT_EQ(backend.WaitForSamples({out, 1}).code(), absl::StatusCode::kFailedPrecondition);

  // The same two steps one at a time with the token written in: the same draw.
  SampledToken first_again, second_again;
  ASSERT_TRUE(backend.ForwardAndSample({ids, pos, {&seq, 1}, rows}, {.rows = {&row, 1}}, {&first_again, 1}).ok());
  const int32_t known_ids[] = {first_again.token_id};
  ASSERT_TRUE(
      backend.ForwardAndSample({known_ids, next_pos, {&next, 1}, next_rows}, {.rows = {&row, 1}}, {&second_again, 1})
          .ok());
  EXPECT_EQ(second.token_id, second_again.token_id);
  // The plain paths refuse fed-back tokens.
  std::vector<float> logits(static_cast<size_t>(backend.vocab_size()));
  EXPECT_EQ((*c)->Forward({next_ids, next_pos, {&next, 1}, next_rows, fed}, logits).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ernie
