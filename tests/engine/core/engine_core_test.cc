// The engine end to end on the CPU reference backend: many requests batched
// together (chunked prefill, small token budgets, preemption under a tiny KV
// pool, n > 1) each produce exactly the tokens they produce alone, which are
// Hugging Face's greedy tokens for the recorded checkpoints.
#include "engine/core/engine_core.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/instant/instant_backend.h"
#include "engine/core/engine_loop.h"
#include "nlohmann/json.hpp"

namespace ernie {
namespace {

// Collects a request's outputs per sample.
class CollectingSink : public RequestSink {
 public:
  void OnOutput(const SampleOutput& out) override {
    auto& s = samples[out.index];
    s.tokens.insert(s.tokens.end(), out.token_ids.begin(), out.token_ids.end());
    for (const auto& lp : out.logprobs) s.logprobs.push_back(lp.logprob.value_or(0));
    s.completion_tokens = out.completion_tokens;
    s.cached = out.cached_prompt_tokens;
    if (out.finish_reason != FinishReason::kNone) {
      ++s.finishes;
      s.finish = out.finish_reason;
      ++finished_samples;
    }
    ++messages;
  }
  void OnError(const absl::Status& s) override { error = s; }

  struct Sample {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    int32_t completion_tokens = 0, cached = 0, finishes = 0;
    FinishReason finish = FinishReason::kNone;
  };
  std::map<int, Sample> samples;
  absl::Status error;
  int messages = 0;
  std::atomic<int> finished_samples{0};  // the one field another thread may poll
};

struct Prompt {
  std::vector<int32_t> ids;
  std::vector<int32_t> expected;  // HF greedy
};

class EngineCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(ERNIE_TEST_DATA_DIR) + "/dense_reference/gqa2_bf16_untied_v1002";
    auto m = LoadModel(dir_);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    const auto expected = nlohmann::json::parse(std::ifstream(dir_ + "/expected.json"));
    for (const auto& p : expected["prompts"]) {
      Prompt prompt;
      prompt.ids = p["prompt_ids"].get<std::vector<int32_t>>();
      for (const auto& s : p["steps"]) prompt.expected.push_back(s["token"].get<int32_t>());
      prompts_.push_back(prompt);
    }
  }

  std::unique_ptr<EngineCore> MakeEngine(int64_t num_blocks, int64_t block_size, int32_t budget, int32_t max_seqs = 64,
                                         int32_t max_waiting = 4096) {
    auto b = cpu::CpuBackend::Create(*model_, {.num_threads = 2, .block_size = block_size, .num_blocks = num_blocks,
                                               .max_tokens_per_step = 512});
    EXPECT_TRUE(b.ok()) << b.status();
    backend_ = std::move(*b);
    auto e = EngineCore::Create(backend_.get(), {.scheduler = {.max_num_seqs = max_seqs, .max_num_batched_tokens = budget,
                                                               .max_waiting_sequences = max_waiting},
                                                 .max_model_len = 512,
                                                 .eos_token_ids = {2}});
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(*e);
  }

  static SamplingParams Greedy(int max_tokens) {
    return SamplingParams{.temperature = 0.0f, .ignore_eos = true, .max_tokens = max_tokens};
  }

  static void RunToCompletion(EngineCore& engine, int max_steps = 100000) {
    for (int i = 0; i < max_steps && engine.HasWork(); ++i) engine.Step();
    ASSERT_FALSE(engine.HasWork());
  }

  std::string dir_;
  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<cpu::CpuBackend> backend_;
  std::vector<Prompt> prompts_;
};

TEST_F(EngineCoreTest, BatchedGreedyEqualsHuggingFace) {
  // Budget 24 tokens a step: the 300-token prompt prefills in 13 chunks while the others decode.
  auto engine = MakeEngine(128, 16, 24);
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (size_t i = 0; i < prompts_.size(); ++i) {
    sinks.push_back(std::make_shared<CollectingSink>());
    ASSERT_TRUE(engine->AddRequest({.request_id = absl::StrCat("r", i), .prompt_token_ids = prompts_[i].ids,
                                    .sampling = Greedy(24), .sink = sinks.back()})
                    .ok());
  }
  RunToCompletion(*engine);
  for (size_t i = 0; i < prompts_.size(); ++i) {
    const auto& s = sinks[i]->samples[0];
    EXPECT_EQ(s.finish, FinishReason::kLength);
    EXPECT_EQ(s.finishes, 1);
    ASSERT_EQ(s.tokens.size(), 24u);
    EXPECT_EQ(s.tokens, std::vector<int32_t>(prompts_[i].expected.begin(), prompts_[i].expected.begin() + 24))
        << "prompt " << i;
  }
  EXPECT_EQ(engine->Load().kv_blocks_used, 0);
}

TEST_F(EngineCoreTest, PreemptionUnderATinyPoolKeepsOutputsExact) {
  // 12 blocks of 4 tokens = 48 slots: the 33-token prompts cannot all stay resident.
  auto engine = MakeEngine(12, 4, 64);
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (int i = 0; i < 4; ++i) {
    sinks.push_back(std::make_shared<CollectingSink>());
    ASSERT_TRUE(engine->AddRequest({.request_id = absl::StrCat("p", i), .prompt_token_ids = prompts_[2].ids,
                                    .sampling = Greedy(12), .sink = sinks.back()})
                    .ok());
  }
  RunToCompletion(*engine);
  EXPECT_GT(engine->Load().preemptions, 0);
  for (const auto& sink : sinks)
    EXPECT_EQ(sink->samples[0].tokens, std::vector<int32_t>(prompts_[2].expected.begin(), prompts_[2].expected.begin() + 12));
  EXPECT_EQ(engine->Load().kv_blocks_used, 0);
}

TEST_F(EngineCoreTest, PrefixCacheReportsCachedTokensAndSameOutput) {
  auto engine = MakeEngine(128, 16, 512);
  auto first = std::make_shared<CollectingSink>(), second = std::make_shared<CollectingSink>();
  ASSERT_TRUE(engine->AddRequest({.request_id = "a", .prompt_token_ids = prompts_[3].ids, .sampling = Greedy(8), .sink = first}).ok());
  RunToCompletion(*engine);
  ASSERT_TRUE(engine->AddRequest({.request_id = "b", .prompt_token_ids = prompts_[3].ids, .sampling = Greedy(8), .sink = second}).ok());
  RunToCompletion(*engine);
  EXPECT_EQ(first->samples[0].cached, 0);
  EXPECT_EQ(second->samples[0].cached, 288);  // 18 full blocks of the 300-token prompt
  EXPECT_EQ(first->samples[0].tokens, second->samples[0].tokens);
}

TEST_F(EngineCoreTest, ParallelSamplesShareThePromptAndAreSeeded) {
  auto engine = MakeEngine(128, 16, 512);
  SamplingParams p{.temperature = 1.0f, .seed = 7, .ignore_eos = true, .max_tokens = 10, .logprobs = true, .n = 4};
  auto a = std::make_shared<CollectingSink>(), b = std::make_shared<CollectingSink>();
  ASSERT_TRUE(engine->AddRequest({.request_id = "a", .prompt_token_ids = prompts_[2].ids, .sampling = p, .sink = a}).ok());
  // The same request again, batched beside a different one: same seed, same tokens.
  ASSERT_TRUE(engine->AddRequest({.request_id = "x", .prompt_token_ids = prompts_[1].ids, .sampling = Greedy(5),
                                  .sink = std::make_shared<CollectingSink>()}).ok());
  RunToCompletion(*engine);
  ASSERT_TRUE(engine->AddRequest({.request_id = "b", .prompt_token_ids = prompts_[2].ids, .sampling = p, .sink = b}).ok());
  RunToCompletion(*engine);
  ASSERT_EQ(a->samples.size(), 4u);
  std::set<std::vector<int32_t>> distinct;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(a->samples[i].tokens.size(), 10u);
    EXPECT_EQ(a->samples[i].logprobs.size(), 10u);
    EXPECT_EQ(a->samples[i].tokens, b->samples[i].tokens) << "sample " << i;
    distinct.insert(a->samples[i].tokens);
  }
  EXPECT_GT(distinct.size(), 1u);
  EXPECT_EQ(engine->Load().kv_blocks_used, 0);
}

TEST_F(EngineCoreTest, ParallelSamplesStayWithinMaxNumSeqs) {
  // The siblings of an n > 1 request ran as forks whether or not
  // max_num_seqs had room (4 running under a limit of 1), and a sibling
  // that could not fork was queued through Add, which drops it when the
  // waiting queue is full (here at 1): its request never finished.
  SamplingParams p{.temperature = 1.0f, .seed = 11, .ignore_eos = true, .max_tokens = 6, .n = 4};
  auto unbounded = std::make_shared<CollectingSink>();
  {
    auto engine = MakeEngine(128, 16, 512);
    ASSERT_TRUE(engine->AddRequest({.request_id = "u", .prompt_token_ids = prompts_[2].ids, .sampling = p,
                                    .sink = unbounded}).ok());
    RunToCompletion(*engine);
  }
  auto engine = MakeEngine(128, 16, 512, /*max_seqs=*/1, /*max_waiting=*/1);
  auto bounded = std::make_shared<CollectingSink>();
  ASSERT_TRUE(engine->AddRequest({.request_id = "b", .prompt_token_ids = prompts_[2].ids, .sampling = p,
                                  .sink = bounded}).ok());
  int max_running = 0;
  for (int i = 0; i < 1000 && engine->HasWork(); ++i) {
    engine->Step();
    max_running = std::max<int>(max_running, static_cast<int>(engine->Load().running));
  }
  ASSERT_FALSE(engine->HasWork());
  EXPECT_EQ(max_running, 1);
  ASSERT_EQ(bounded->samples.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(bounded->samples[i].finish, FinishReason::kLength) << "sample " << i;
    EXPECT_EQ(bounded->samples[i].finishes, 1) << "sample " << i;
    // Seeded per sample: recomputing the prompt instead of sharing the
    // parent's logits row draws the same tokens.
    EXPECT_EQ(bounded->samples[i].tokens, unbounded->samples[i].tokens) << "sample " << i;
  }
  EXPECT_EQ(engine->Load().kv_blocks_used, 0);
}

TEST_F(EngineCoreTest, StopTokensMinTokensAndErrors) {
  auto engine = MakeEngine(64, 16, 512);
  const auto& ref = prompts_[1];
  // Stop at HF's 3rd token: finish "stop", the token included.
  auto s = std::make_shared<CollectingSink>();
  SamplingParams stop = Greedy(20);
  stop.stop_token_ids = {ref.expected[2]};
  ASSERT_TRUE(engine->AddRequest({.request_id = "s", .prompt_token_ids = ref.ids, .sampling = stop, .sink = s}).ok());
  RunToCompletion(*engine);
  const auto first_stop = std::find(ref.expected.begin(), ref.expected.end(), ref.expected[2]) - ref.expected.begin();
  EXPECT_EQ(s->samples[0].finish, FinishReason::kStop);
  EXPECT_EQ(static_cast<long>(s->samples[0].tokens.size()), first_stop + 1);

  auto bad = [&](EngineRequest r) { return engine->AddRequest(std::move(r)); };
  auto sink = std::make_shared<CollectingSink>();
  EXPECT_EQ(bad({.request_id = "", .prompt_token_ids = {5}, .sampling = Greedy(2), .sink = sink}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad({.request_id = "v", .prompt_token_ids = {5, 1002}, .sampling = Greedy(2), .sink = sink}).message())
                .find("prompt_token_ids[1]"),
            std::string::npos);
  EXPECT_NE(std::string(bad({.request_id = "t", .prompt_token_ids = {5}, .sampling = {.temperature = -1}, .sink = sink}).message())
                .find("temperature"),
            std::string::npos);
  ASSERT_TRUE(bad({.request_id = "dup", .prompt_token_ids = {5}, .sampling = Greedy(2), .sink = sink}).ok());
  EXPECT_EQ(bad({.request_id = "dup", .prompt_token_ids = {5}, .sampling = Greedy(2), .sink = sink}).code(),
            absl::StatusCode::kAlreadyExists);
  RunToCompletion(*engine);
}

TEST_F(EngineCoreTest, AbortAtAnyPointFreesBlocks) {
  auto engine = MakeEngine(64, 4, 16);
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (int i = 0; i < 3; ++i) {
    sinks.push_back(std::make_shared<CollectingSink>());
    SamplingParams p = Greedy(30);
    p.n = i + 1;
    p.temperature = 0.7f;
    ASSERT_TRUE(engine->AddRequest({.request_id = absl::StrCat(i), .prompt_token_ids = prompts_[2].ids, .sampling = p,
                                    .sink = sinks.back()}).ok());
  }
  engine->Step();                 // request 0 mid-prefill
  EXPECT_TRUE(engine->Abort("0"));
  for (int i = 0; i < 6; ++i) engine->Step();
  EXPECT_TRUE(engine->Abort("2"));  // n = 3, decoding
  EXPECT_FALSE(engine->Abort("2"));
  RunToCompletion(*engine);
  EXPECT_EQ(sinks[0]->samples[0].finish, FinishReason::kAbort);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(sinks[2]->samples[i].finish, FinishReason::kAbort) << i;
  for (const auto& [i, s] : sinks[1]->samples) EXPECT_EQ(s.finish, FinishReason::kLength);
  EXPECT_EQ(engine->Load().kv_blocks_used, 0);
  EXPECT_EQ(engine->Load().running + engine->Load().waiting, 0);
}

TEST(EngineLoopTest, ThreadedSubmitStreamsAndStops) {
  auto backend = InstantBackend::Create({.vocab_size = 64, .block_size = 4, .num_blocks = 256});
  ASSERT_TRUE(backend.ok());
  auto core = EngineCore::Create(backend->get(), {.max_model_len = 256, .eos_token_ids = {2}});
  ASSERT_TRUE(core.ok());
  auto sink = std::make_shared<CollectingSink>();
  {
    EngineLoop loop(std::move(*core));
    EXPECT_FALSE(loop.Submit({.request_id = "x", .prompt_token_ids = {}, .sink = sink}).ok());
    ASSERT_TRUE(loop.Submit({.request_id = "a", .prompt_token_ids = {5, 6, 7},
                             .sampling = {.temperature = 0, .ignore_eos = true, .max_tokens = 50}, .sink = sink}).ok());
    // Only the atomic is read while the engine thread runs (TSan found this
    // loop reading the map the engine thread was writing); the rest after
    // the loop's thread has joined.
    for (int i = 0; i < 200 && sink->finished_samples.load() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  EXPECT_EQ(sink->samples[0].tokens.size(), 50u);
  EXPECT_EQ(sink->samples[0].finish, FinishReason::kLength);
}

}  // namespace
}  // namespace ernie
