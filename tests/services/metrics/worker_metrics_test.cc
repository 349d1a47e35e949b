// The engine's observer hooks and the worker's metrics, driven step by step
// on the instant backend: exact counts for finished samples, tokens, steps,
// n > 1 samples, aborts, and the scrape-time engine gauges.
#include "services/worker/worker_metrics.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/instant/instant_backend.h"
#include "engine/core/engine_core.h"

namespace ernie::worker {
namespace {

class NullSink : public RequestSink {
 public:
  void OnOutput(const SampleOutput&) override {}
  void OnError(const absl::Status&) override {}
};

bool Has(const std::string& text, const std::string& line) { return absl::StrContains(text, line + "\n"); }

class WorkerMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = InstantBackend::Create({.vocab_size = 64, .block_size = 4, .num_blocks = 64});
    ASSERT_TRUE(backend.ok());
    backend_ = std::move(*backend);
    auto core = EngineCore::Create(backend_.get(), {.max_model_len = 128, .eos_token_ids = {2}});
    ASSERT_TRUE(core.ok());
    core_ = std::move(*core);
    auto metrics = WorkerMetrics::Create(registry_, 128, 8);
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    metrics_ = std::move(*metrics);
    core_->SetObserver(metrics_.get());
  }

  void Add(const std::string& id, std::vector<int32_t> prompt, int max_tokens, int n = 1) {
    EngineRequest request;
    request.request_id = id;
    request.prompt_token_ids = std::move(prompt);
    request.sampling.temperature = 0;
    request.sampling.ignore_eos = true;
    request.sampling.max_tokens = max_tokens;
    request.sampling.n = n;
    request.sink = std::make_shared<NullSink>();
    ASSERT_TRUE(core_->AddRequest(std::move(request)).ok());
  }

  metrics::Registry registry_;
  std::unique_ptr<InstantBackend> backend_;
  std::unique_ptr<EngineCore> core_;
  std::unique_ptr<WorkerMetrics> metrics_;
};

TEST_F(WorkerMetricsTest, CountsFinishedSamplesTokensAndSteps) {
  Add("a", {5, 6, 7}, 4);
  Add("b", {5, 6, 7, 8, 9}, 2, /*n=*/3);
  while (core_->HasWork()) core_->Step();
  // Steps run (with overlapped steps the last Step() call only reads the last one).
  const int64_t steps = core_->Load().steps;
  EXPECT_TRUE(core_->overlaps_steps());  // the instant backend overlaps like a GPU
  const std::string text = registry_.Exposition();
  // 1 + 3 samples, all finished by length; 4 + 3 * 2 generated tokens.
  EXPECT_TRUE(Has(text, "ernie_request_success_total{finish_reason=\"length\"} 4")) << text;
  EXPECT_TRUE(Has(text, "ernie_request_success_total{finish_reason=\"stop\"} 0"));
  EXPECT_TRUE(Has(text, "ernie_request_generation_tokens_sum 10"));
  EXPECT_TRUE(Has(text, "ernie_request_generation_tokens_count 4"));
  // Each sample's prompt counts once at its first token (vLLM counts n children so).
  EXPECT_TRUE(Has(text, "ernie_prompt_tokens_total 18"));  // 3 + 3 * 5
  EXPECT_TRUE(Has(text, "ernie_request_prompt_tokens_sum 18"));
  EXPECT_TRUE(Has(text, "ernie_time_to_first_token_seconds_count 4"));
  // Every token but each sample's first is an inter-token gap: 10 - 4.
  EXPECT_TRUE(Has(text, "ernie_inter_token_latency_seconds_count 6"));
  EXPECT_TRUE(Has(text, absl::StrCat("ernie_step_tokens_count ", steps)));
  EXPECT_TRUE(Has(text, absl::StrCat("ernie_step_batch_size_count ", steps)));
  // Every step's backend call is observed, and inside the step's own time.
  EXPECT_TRUE(Has(text, absl::StrCat("ernie_step_model_seconds_count ", steps)));
  const auto sum_of = [&](const std::string& name) {
    const size_t at = text.find(name + "_sum ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + name.size() + 5));
  };
  EXPECT_GE(sum_of("ernie_step_model_seconds"), 0.0);
  EXPECT_LE(sum_of("ernie_step_model_seconds"), sum_of("ernie_step_duration_seconds"));
  // Step 1 computes both prompts (3 + 5 tokens); the rest decode one token per running sample.
  // Total tokens computed = prompts 8 + decodes (4 - 1) + 3 * (2 - 1) = 14.
  EXPECT_TRUE(Has(text, "ernie_step_tokens_sum 14")) << text;
  EXPECT_TRUE(Has(text, "ernie_e2e_request_latency_seconds_count 4"));
  EXPECT_TRUE(Has(text, "ernie_request_prefill_time_seconds_count 4"));
}

TEST_F(WorkerMetricsTest, AbortedBeforeSchedulingCountsAsAbortWithQueueTimeOnly) {
  Add("a", {5, 6, 7}, 4);
  EXPECT_TRUE(core_->Abort("a"));
  const std::string text = registry_.Exposition();
  EXPECT_TRUE(Has(text, "ernie_request_success_total{finish_reason=\"abort\"} 1")) << text;
  EXPECT_TRUE(Has(text, "ernie_request_queue_time_seconds_count 1"));
  EXPECT_TRUE(Has(text, "ernie_request_prefill_time_seconds_count 0"));
  EXPECT_TRUE(Has(text, "ernie_request_inference_time_seconds_count 0"));
  EXPECT_TRUE(Has(text, "ernie_time_to_first_token_seconds_count 0"));
}

TEST_F(WorkerMetricsTest, EngineGaugesAndInfoAreReadAtScrapeTime) {
  EngineLoop loop(std::move(core_));
  std::atomic<bool> draining{false};
  ASSERT_TRUE(metrics_
                  ->AttachEngine(&loop,
                                 {.backend = "instant", .dtype = "none", .kv_dtype = "float32", .block_size = 4,
                                  .num_blocks = 64, .max_model_len = 128, .max_num_seqs = 8,
                                  .max_num_batched_tokens = 2048, .weight_bytes = 0, .kv_cache_bytes = 1024},
                                 &draining)
                  .ok());
  std::string text = registry_.Exposition();
  EXPECT_TRUE(Has(text, "ernie_requests_running 0"));
  EXPECT_TRUE(Has(text, "ernie_kv_cache_usage_ratio 0"));
  EXPECT_TRUE(Has(text, "ernie_worker_draining 0"));
  EXPECT_TRUE(Has(text, "ernie_kv_cache_bytes 1024"));
  // The instant backend has no CUDA graphs: its steps are not counted by mode.
  EXPECT_TRUE(Has(text, "ernie_backend_steps_total{mode=\"graph_replay\"} 0")) << text;
  EXPECT_TRUE(Has(text, "ernie_backend_steps_total{mode=\"eager\"} 0"));
  EXPECT_TRUE(Has(text, "ernie_cache_config_info{backend=\"instant\",dtype=\"none\",cache_dtype=\"float32\","
                        "block_size=\"4\",num_blocks=\"64\",max_model_len=\"128\",max_num_seqs=\"8\","
                        "max_num_batched_tokens=\"2048\",enable_prefix_caching=\"true\"} 1"))
      << text;
  draining = true;
  EXPECT_TRUE(Has(registry_.Exposition(), "ernie_worker_draining 1"));
}

}  // namespace
}  // namespace ernie::worker
