#include "services/worker/worker_metrics.h"

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "services/common/metrics/standard_buckets.h"

namespace ernie::worker {

using metrics::Counter;
using metrics::Histogram;

absl::StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Create(metrics::Registry& registry,
                                                                     int64_t max_model_len, int64_t max_num_seqs) {
  std::unique_ptr<WorkerMetrics> m(new WorkerMetrics(registry));
  ERNIE_RETURN_IF_ERROR(m->Register(max_model_len, max_num_seqs));
  return m;
}

absl::Status WorkerMetrics::Register(int64_t max_model_len, int64_t max_num_seqs) {
  auto& r = registry_;
  ERNIE_ASSIGN_OR_RETURN(auto* prompt, r.AddCounter("ernie_prompt_tokens_total",
                                                    "Prompt tokens of requests that reached their first token "
                                                    "(cached prefix tokens included)."));
  prompt_tokens_ = &prompt->Get();
  ERNIE_ASSIGN_OR_RETURN(auto* success, r.AddCounter<1>("ernie_request_success_total",
                                                        "Finished samples by finish reason (stop, length, abort).",
                                                        {"finish_reason"}));
  success_stop_ = &success->WithLabels({"stop"});
  success_length_ = &success->WithLabels({"length"});
  success_abort_ = &success->WithLabels({"abort"});
  ERNIE_ASSIGN_OR_RETURN(auto* failed, r.AddCounter("ernie_request_failures_total",
                                                    "Samples ended by an engine or backend error."));
  failures_ = &failed->Get();

  auto histogram = [&r](const char* name, const char* help, std::vector<double> bounds) -> absl::StatusOr<Histogram*> {
    ERNIE_ASSIGN_OR_RETURN(auto* family, r.AddHistogram(name, help, std::move(bounds)));
    return &family->Get();
  };
  using metrics::FirstTokenBuckets, metrics::TokenGapBuckets, metrics::RequestTimeBuckets;
  ERNIE_ASSIGN_OR_RETURN(ttft_, histogram("ernie_time_to_first_token_seconds",
                                          "Time from a request's arrival at the engine to a sample's first token.",
                                          FirstTokenBuckets()));
  ERNIE_ASSIGN_OR_RETURN(itl_, histogram("ernie_inter_token_latency_seconds",
                                         "Time between two consecutive tokens of one sample.", TokenGapBuckets()));
  ERNIE_ASSIGN_OR_RETURN(e2e_, histogram("ernie_e2e_request_latency_seconds",
                                         "Time from arrival at the engine to the end of a sample.",
                                         RequestTimeBuckets()));
  ERNIE_ASSIGN_OR_RETURN(queue_, histogram("ernie_request_queue_time_seconds",
                                           "Time a request waited before its first step.", RequestTimeBuckets()));
  ERNIE_ASSIGN_OR_RETURN(prefill_, histogram("ernie_request_prefill_time_seconds",
                                             "Time from a request's first step to a sample's first token.",
                                             RequestTimeBuckets()));
  ERNIE_ASSIGN_OR_RETURN(decode_, histogram("ernie_request_decode_time_seconds",
                                            "Time from a sample's first token to its last.", RequestTimeBuckets()));
  ERNIE_ASSIGN_OR_RETURN(inference_, histogram("ernie_request_inference_time_seconds",
                                               "Time from a request's first step to the end of a sample.",
                                               RequestTimeBuckets()));
  ERNIE_ASSIGN_OR_RETURN(prompt_len_, histogram("ernie_request_prompt_tokens", "Prompt length of finished samples.",
                                                metrics::OneTwoFiveBuckets(max_model_len)));
  ERNIE_ASSIGN_OR_RETURN(generation_len_, histogram("ernie_request_generation_tokens",
                                                    "Generated tokens of finished samples.",
                                                    metrics::OneTwoFiveBuckets(max_model_len)));
  ERNIE_ASSIGN_OR_RETURN(step_tokens_, histogram("ernie_step_tokens", "Tokens computed per engine step.",
                                                 metrics::OneTwoFiveBuckets(std::max<int64_t>(max_model_len, 8192))));
  ERNIE_ASSIGN_OR_RETURN(step_batch_, histogram("ernie_step_batch_size", "Sequences per engine step.",
                                                metrics::PowerOfTwoBuckets(max_num_seqs)));
  ERNIE_ASSIGN_OR_RETURN(step_time_, histogram("ernie_step_duration_seconds",
                                               "Wall time of one engine step (schedule, forward, sample).",
                                               TokenGapBuckets()));
  ERNIE_ASSIGN_OR_RETURN(step_model_time_,
                         histogram("ernie_step_model_seconds",
                                   "Part of an engine step inside the backend's forward (and device sampling) call; "
                                   "the rest of ernie_step_duration_seconds is host work around it.",
                                   TokenGapBuckets()));
  return absl::OkStatus();
}

absl::Status WorkerMetrics::AttachEngine(const EngineLoop* engine, const WorkerMetricsInfo& info,
                                         const std::atomic<bool>* draining) {
  auto& r = registry_;
  // Each callback takes one snapshot (a short lock in EngineLoop).
  auto load = [engine](auto member) {
    return [engine, member]() -> double { return static_cast<double>(engine->Load().*member); };
  };
  ERNIE_ASSIGN_OR_RETURN(auto* running, r.AddGauge("ernie_requests_running", "Sequences in the running batch."));
  running->AddCallback({}, load(&EngineLoad::running));
  ERNIE_ASSIGN_OR_RETURN(auto* waiting, r.AddGauge("ernie_requests_waiting", "Sequences waiting to be scheduled."));
  waiting->AddCallback({}, load(&EngineLoad::waiting));
  ERNIE_ASSIGN_OR_RETURN(auto* usage, r.AddGauge("ernie_kv_cache_usage_ratio",
                                                 "Fraction of KV cache blocks in use (1 = full)."));
  usage->AddCallback({}, [engine] {
    const EngineLoad l = engine->Load();
    return l.kv_blocks_total > 0 ? static_cast<double>(l.kv_blocks_used) / l.kv_blocks_total : 0.0;
  });
  ERNIE_ASSIGN_OR_RETURN(auto* used, r.AddGauge("ernie_kv_cache_used_blocks", "KV cache blocks in use."));
  used->AddCallback({}, load(&EngineLoad::kv_blocks_used));
  ERNIE_ASSIGN_OR_RETURN(auto* queried, r.AddCounter("ernie_prefix_cache_queries_tokens_total",
                                                     "Prompt tokens looked up in the prefix cache."));
  queried->AddCallback({}, load(&EngineLoad::prefix_queried_tokens));
  ERNIE_ASSIGN_OR_RETURN(auto* hits, r.AddCounter("ernie_prefix_cache_hits_tokens_total",
                                                  "Prompt tokens found in the prefix cache."));
  hits->AddCallback({}, load(&EngineLoad::prefix_hit_tokens));
  ERNIE_ASSIGN_OR_RETURN(auto* preempted, r.AddCounter("ernie_preemptions_total",
                                                       "Sequences preempted (blocks freed, recomputed later)."));
  preempted->AddCallback({}, load(&EngineLoad::preemptions));
  ERNIE_ASSIGN_OR_RETURN(auto* generated, r.AddCounter("ernie_generation_tokens_total", "Tokens generated."));
  generated->AddCallback({}, load(&EngineLoad::generated_tokens));
  ERNIE_ASSIGN_OR_RETURN(auto* computed, r.AddCounter("ernie_prefill_computed_tokens_total",
                                                      "Prompt tokens computed by prefill (prefix-cache hits excluded)."));
  computed->AddCallback({}, load(&EngineLoad::prompt_tokens_computed));
  ERNIE_ASSIGN_OR_RETURN(auto* steps, r.AddCounter("ernie_engine_steps_total", "Engine steps run."));
  steps->AddCallback({}, load(&EngineLoad::steps));
  ERNIE_ASSIGN_OR_RETURN(auto* backend_steps,
                         r.AddCounter<1>("ernie_backend_steps_total",
                                         "Backend steps by how they ran: replaying a captured CUDA graph, capturing "
                                         "one, or launched kernel by kernel (eager). Backends without CUDA graphs "
                                         "(cpu, instant) leave all three at 0.",
                                         {"mode"}));
  backend_steps->AddCallback({"graph_replay"}, [engine] {
    return static_cast<double>(engine->Load().backend_steps.graph_replays);
  });
  backend_steps->AddCallback({"graph_capture"}, [engine] {
    return static_cast<double>(engine->Load().backend_steps.graph_captures);
  });
  backend_steps->AddCallback({"eager"}, [engine] {
    return static_cast<double>(engine->Load().backend_steps.eager_steps);
  });

  ERNIE_ASSIGN_OR_RETURN(auto* config_info,
                         r.AddGauge<9>("ernie_cache_config_info",
                                       "Engine and KV cache configuration (the value is 1), like vLLM's cache_config_info.",
                                       {"backend", "dtype", "cache_dtype", "block_size", "num_blocks", "max_model_len",
                                        "max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching"}));
  config_info
      ->WithLabels({info.backend, info.dtype, info.kv_dtype, absl::StrCat(info.block_size),
                    absl::StrCat(info.num_blocks), absl::StrCat(info.max_model_len), absl::StrCat(info.max_num_seqs),
                    absl::StrCat(info.max_num_batched_tokens), info.enable_prefix_caching ? "true" : "false"})
      .Set(1);
  ERNIE_ASSIGN_OR_RETURN(auto* weights, r.AddGauge("ernie_model_weight_bytes", "Bytes of the model's weights."));
  weights->Get().Set(static_cast<double>(info.weight_bytes));
  ERNIE_ASSIGN_OR_RETURN(auto* kv_bytes, r.AddGauge("ernie_kv_cache_bytes", "Bytes of the KV cache block pool."));
  kv_bytes->Get().Set(static_cast<double>(info.kv_cache_bytes));
  ERNIE_ASSIGN_OR_RETURN(auto* drain, r.AddGauge("ernie_worker_draining",
                                                 "1 while the worker drains after SIGTERM (refusing new requests)."));
  drain->AddCallback({}, [draining] { return draining->load() ? 1.0 : 0.0; });
  return absl::OkStatus();
}

void WorkerMetrics::OnStep(const StepStats& step) {
  step_tokens_->Observe(step.num_tokens);
  step_batch_->Observe(step.num_sequences);
  step_time_->Observe(step.duration_s);
  step_model_time_->Observe(step.model_s);
}

void WorkerMetrics::OnFirstToken(double time_to_first_token_s, int32_t prompt_tokens) {
  ttft_->Observe(time_to_first_token_s);
  prompt_tokens_->Increment(prompt_tokens);
}

void WorkerMetrics::OnInterTokenGap(double gap_s) { itl_->Observe(gap_s); }

void WorkerMetrics::OnSampleFinished(const FinishedSampleStats& stats) {
  if (stats.failed) {
    failures_->Increment();
    return;
  }
  switch (stats.finish_reason) {
    case FinishReason::kStop: success_stop_->Increment(); break;
    case FinishReason::kLength: success_length_->Increment(); break;
    default: success_abort_->Increment(); break;
  }
  e2e_->Observe(stats.e2e_s);
  queue_->Observe(stats.queue_s);
  if (stats.scheduled) inference_->Observe(stats.inference_s);
  if (stats.produced_tokens) {
    prefill_->Observe(stats.prefill_s);
    decode_->Observe(stats.decode_s);
  }
  prompt_len_->Observe(stats.prompt_tokens);
  generation_len_->Observe(stats.generation_tokens);
}

}  // namespace ernie::worker
