// The worker's Prometheus metrics: an EngineObserver that turns the engine's
// step and request reports into histograms and counters (lock-free), plus
// scrape-time gauges read from the EngineLoop's load snapshot. Names and
// meanings follow vLLM's (vllm:num_requests_running -> ernie_requests_running,
// ...); deploy/README.md lists them all.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/core/engine_loop.h"
#include "engine/core/engine_observer.h"
#include "services/common/metrics/registry.h"

namespace ernie::worker {

// What the info gauge and the size gauges report (known after loading).
struct WorkerMetricsInfo {
  std::string backend, dtype, kv_dtype;
  int64_t block_size = 0, num_blocks = 0;
  int64_t max_model_len = 0, max_num_seqs = 0, max_num_batched_tokens = 0;
  bool enable_prefix_caching = true;
  int64_t weight_bytes = 0;    // the checkpoint's tensor bytes
  int64_t kv_cache_bytes = 0;  // the KV block pool
};

class WorkerMetrics final : public EngineObserver {
 public:
  // Registers the engine families on `registry` (which must outlive this).
  // Histogram bounds for lengths reach `max_model_len` / `max_num_seqs`.
  static absl::StatusOr<std::unique_ptr<WorkerMetrics>> Create(metrics::Registry& registry, int64_t max_model_len,
                                                               int64_t max_num_seqs);

  // Adds the load gauges and counters read from `engine` at scrape time, and
  // the info / size gauges. `engine` must outlive every later scrape (stop the
  // metrics server first). `draining` is read at scrape time too.
  absl::Status AttachEngine(const EngineLoop* engine, const WorkerMetricsInfo& info,
                            const std::atomic<bool>* draining);

  // EngineObserver (engine thread).
  void OnStep(const StepStats& step) override;
  void OnFirstToken(double time_to_first_token_s, int32_t prompt_tokens) override;
  void OnInterTokenGap(double gap_s) override;
  void OnSampleFinished(const FinishedSampleStats& stats) override;

 private:
  explicit WorkerMetrics(metrics::Registry& registry) : registry_(registry) {}
  absl::Status Register(int64_t max_model_len, int64_t max_num_seqs);

  metrics::Registry& registry_;
  // Each points into the registry (stable for its life), looked up once.
  metrics::Counter* prompt_tokens_ = nullptr;
  metrics::Counter* success_stop_ = nullptr;
  metrics::Counter* success_length_ = nullptr;
  metrics::Counter* success_abort_ = nullptr;
  metrics::Counter* failures_ = nullptr;
  metrics::Histogram* ttft_ = nullptr;
  metrics::Histogram* itl_ = nullptr;
  metrics::Histogram* e2e_ = nullptr;
  metrics::Histogram* queue_ = nullptr;
  metrics::Histogram* prefill_ = nullptr;
  metrics::Histogram* decode_ = nullptr;
  metrics::Histogram* inference_ = nullptr;
  metrics::Histogram* prompt_len_ = nullptr;
  metrics::Histogram* generation_len_ = nullptr;
  metrics::Histogram* step_tokens_ = nullptr;
  metrics::Histogram* step_batch_ = nullptr;
  metrics::Histogram* step_time_ = nullptr;
  metrics::Histogram* step_model_time_ = nullptr;
};

}  // namespace ernie::worker
