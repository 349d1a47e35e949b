// Overlapped steps on the CUDA backend (CudaBackendOptions::overlap_steps):
// the engine launches step N+1 before reading step N, decodes take their
// input token from the sampler's device buffers (kernels/feed_back_tokens),
// and the sampler's and step inputs' staging slots take turns. The same
// requests through an engine on a backend without overlap must give the
// same tokens and logprobs bit for bit: every request decodes to its length
// (no stop), so both runs have the same batches, hence the same kernels.
#include <gtest/gtest.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "engine/core/engine_core.h"
#include "tests/engine/cuda/backend_runner.h"

namespace ernie::testing {
namespace {

class Collect : public RequestSink {
 public:
  void OnOutput(const SampleOutput& out) override {
    tokens.insert(tokens.end(), out.token_ids.begin(), out.token_ids.end());
    for (const auto& t : out.logprobs) logprobs.push_back(t.logprob.value_or(0));
    if (out.finish_reason != FinishReason::kNone) finish = out.finish_reason;
  }
  void OnError(const absl::Status& s) override { error = s; }
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  FinishReason finish = FinishReason::kNone;
  absl::Status error;
};

struct RunResult {
  std::map<std::string, std::shared_ptr<Collect>> sinks;
  bool overlapped = false;
};

// `requests` requests of mixed sampling (greedy, seeded, logprobs, a
// penalty that is read at once), each decoding 24 tokens.
RunResult RunRequests(const LoadedModel& model, bool overlap, int requests, int64_t max_logit_rows) {
  RunResult out;
  auto backend = CreateCudaBackend(model, {.block_size = 4, .num_blocks = 256, .max_tokens_per_step = 128,
                                           .max_logit_rows = max_logit_rows, .overlap_steps = overlap});
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return out;
  auto engine = EngineCore::Create(backend->get(), {.scheduler = {.max_num_seqs = 16, .max_num_batched_tokens = 128},
                                                    .max_model_len = 128,
                                                    .eos_token_ids = {2}});
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return out;
  out.overlapped = (*engine)->overlaps_steps();
  const int64_t vocab = (*backend)->vocab_size();
  for (int i = 0; i < requests; ++i) {
    SamplingParams p{.ignore_eos = true, .max_tokens = 24};
    switch (i % 4) {
      case 0: p.temperature = 0.0f; break;                                  // the greedy kernel
      case 1: p.temperature = 0.9f; p.top_p = 0.9f; p.seed = 7 + i; break;  // the sampling kernel
      case 2: p.temperature = 0.7f; p.seed = 3 + i; p.logprobs = true; p.top_logprobs = 2; break;
      case 3: p.temperature = 0.0f; p.repetition_penalty = 1.3f; break;    // edits: read in its own step
    }
    std::vector<int32_t> prompt;
    for (int j = 0; j < 5 + 3 * i; ++j) prompt.push_back(static_cast<int32_t>(3 + (j * 37 + i * 11) % (vocab - 3)));
    const std::string id = absl::StrCat("r", i);
    out.sinks[id] = std::make_shared<Collect>();
    EXPECT_TRUE((*engine)->AddRequest({.request_id = id, .prompt_token_ids = prompt, .sampling = p,
                                       .sink = out.sinks[id]}).ok());
  }
  for (int step = 0; step < 500 && (*engine)->Step(); ++step) {
  }
  EXPECT_FALSE((*engine)->HasWork());
  EXPECT_EQ((*engine)->Load().kv_blocks_used, 0);
  return out;
}

void ExpectSame(const RunResult& one_at_a_time, const RunResult& overlapped) {
  ASSERT_EQ(one_at_a_time.sinks.size(), overlapped.sinks.size());
  for (const auto& [id, want] : one_at_a_time.sinks) {
    const Collect& got = *overlapped.sinks.at(id);
    ASSERT_TRUE(want->error.ok() && got.error.ok()) << id << ": " << want->error << " / " << got.error;
    EXPECT_EQ(want->tokens.size(), 24u) << id;
    EXPECT_EQ(want->tokens, got.tokens) << id;
    EXPECT_EQ(want->logprobs, got.logprobs) << id;
    EXPECT_EQ(got.finish, FinishReason::kLength) << id;
  }
}

TEST(CudaOverlappedStepsTest, GiveTheOneStepAtATimeTokens) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  auto model = LoadModel(TestDataDir() + "/dense_reference/gqa4_bf16_bias_untied_v515");
  ASSERT_TRUE(model.ok()) << model.status();
  // Six requests: every decode step is enqueued (one lm_head pass), but the
  // penalized requests' steps are read at once.
  const RunResult plain = RunRequests(**model, false, 6, 64);
  const RunResult overlapped = RunRequests(**model, true, 6, 64);
  EXPECT_FALSE(plain.overlapped);
  EXPECT_TRUE(overlapped.overlapped);
  ExpectSame(plain, overlapped);
  // Without the penalized requests every step overlaps the next.
  const RunResult plain3 = RunRequests(**model, false, 3, 64);
  const RunResult overlapped3 = RunRequests(**model, true, 3, 64);
  ExpectSame(plain3, overlapped3);
}

TEST(CudaOverlappedStepsTest, StepsThatCannotBeEnqueuedRunWhole) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  auto model = LoadModel(TestDataDir() + "/dense_reference/gqa4_bf16_bias_untied_v515");
  ASSERT_TRUE(model.ok()) << model.status();
  // Three logit rows a pass: steps of more rows run whole inside their
  // launch (several passes), and the next enqueued step's fed-back tokens
  // then come from the host.
  ExpectSame(RunRequests(**model, false, 7, 3), RunRequests(**model, true, 7, 3));
}

}  // namespace
}  // namespace ernie::testing
