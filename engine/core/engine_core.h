// The engine: one step is schedule -> execute -> update from output (vLLM's
// EngineCore.step()). Owns the scheduler, the KV block bookkeeping, the
// sampler and every live request; drives a Backend it does not own.
//
// Thread-safety: none. EngineLoop runs it on one thread; tests drive it
// directly step by step.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/core/engine_observer.h"
#include "engine/core/engine_types.h"
#include "engine/kv/kv_cache_manager.h"
#include "engine/sample/sampler.h"
#include "engine/sched/scheduler.h"

namespace ernie {

struct EngineConfig {
  sched::SchedulerConfig scheduler;
  int64_t max_model_len = 4096;          // prompt + output tokens of one sequence
  bool enable_prefix_caching = true;
  std::vector<int32_t> eos_token_ids;    // the model's end ids
};

class EngineCore {
 public:
  // `backend` must outlive the engine; its KV shape sizes the block pool.
  static absl::StatusOr<std::unique_ptr<EngineCore>> Create(Backend* backend, const EngineConfig& config);

  // Validates and queues a request. InvalidArgument (bad prompt or sampling
  // field, named), AlreadyExists (request id live), ResourceExhausted (the
  // waiting queue is full). On error nothing is queued and the sink is not called.
  absl::Status AddRequest(EngineRequest request);
  // Ends a request wherever it is; its sink gets finish_reason abort for every
  // unfinished sample. Returns false when no such request is live.
  bool Abort(const std::string& request_id);
  // Aborts every live request (shutdown).
  void AbortAll();

  // Runs one step; false when there was nothing to do.
  bool Step();
  bool HasWork() const { return scheduler_->num_running() + scheduler_->num_waiting() > 0; }

  EngineLoad Load() const;
  // Reports steps, tokens and finished samples to `observer` (null: off).
  // Set it before the first request; it must outlive the engine and is
  // called on the engine's thread.
  void SetObserver(EngineObserver* observer) { observer_ = observer; }
  const EngineConfig& config() const { return config_; }
  const Backend& backend() const { return *backend_; }
  const kv::KvCacheManager& kv() const { return *kv_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct RequestState;
  // One sample of a request: its scheduler sequence and its sampler state.
  struct SampleSlot {
    sched::Sequence seq;
    SamplerRow row;
    // With device sampling and logit_bias or penalties (and no logprobs):
    // the row's edits, kept with row.output.
    std::optional<SampleLogitEdits> edits;
    int64_t max_tokens = 0;
    bool finished = false;
    std::vector<int32_t> pending_tokens;        // produced, not yet delivered this step
    std::vector<SampledToken> pending_logprobs;
    FinishReason finish = FinishReason::kNone;
    std::optional<int32_t> stop_token;
    std::optional<Clock::time_point> first_token_time, last_token_time;  // for the observer
  };
  struct RequestState {
    std::string id;
    SamplingParams sampling;
    std::shared_ptr<RequestSink> sink;
    std::shared_ptr<const PromptTokenSet> prompt_set;
    uint64_t seed = 0;
    std::vector<int32_t> min_tokens_bans;  // eos + stop ids, banned while outputs < min_tokens
    std::vector<std::unique_ptr<SampleSlot>> samples;  // [0] is the parent; the rest fork after prefill
    int32_t num_unfinished = 0;
    Clock::time_point arrival_time;                      // EngineRequest::arrival_time, else AddRequest
    std::optional<Clock::time_point> first_scheduled_time;  // its first chunk in a batch
  };

  EngineCore(Backend* backend, const EngineConfig& config, kv::KvCacheManager kv, Sampler sampler);

  void Execute(const sched::StepPlan& plan);
  // Forks the parent's n-1 siblings once its prompt is computed; returns the slots that sample now.
  void ForkSiblings(RequestState& req, std::vector<SampleSlot*>& rows, std::vector<int32_t>& row_logits);
  // Device sampling (backends with SupportsDeviceSampling()): the device
  // sample rows of the step, one per logits row (n per row of a request
  // forking now), with their edits and min_tokens bans.
  void PlanDeviceSampling(const sched::StepPlan& plan);
  // Gives `slot` its logit edits when its rows will be edited on the device.
  void StartLogitEdits(const RequestState& req, SampleSlot& slot) const;
  // One SampledToken per row: the device's results, or the host Sampler's
  // on logits_ when the backend does not sample on its device.
  absl::StatusOr<std::vector<SampledToken>> SampleRows(const std::vector<SampleSlot*>& rows,
                                                       const std::vector<int32_t>& row_logits);
  void AppendToken(RequestState& req, SampleSlot& slot, const SampledToken& token);
  void Deliver(RequestState& req);
  void FinishSlot(RequestState& req, SampleSlot& slot, FinishReason reason);
  void FailRequest(RequestState& req, const absl::Status& status);
  void EraseIfDone(const std::string& id);
  void ReportFinished(const RequestState& req, const SampleSlot& slot, FinishReason reason, bool failed);

  Backend* backend_;
  EngineConfig config_;
  std::unique_ptr<kv::KvCacheManager> kv_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  Sampler sampler_;
  absl::flat_hash_map<std::string, std::unique_ptr<RequestState>> requests_;  // live requests by id
  absl::flat_hash_map<kv::SequenceId, std::pair<RequestState*, SampleSlot*>> by_sequence_;
  std::vector<BlockCopyOp> pending_copies_;  // from forks, run before the next forward
  kv::SequenceId next_sequence_id_ = 1;
  uint64_t next_arrival_ = 1;

  // Step scratch, reused (no per-step allocation once warm).
  std::vector<int32_t> tokens_, positions_, logit_rows_;
  std::vector<SequenceSlice> slices_;
  std::vector<float> logits_;  // [logit rows, vocab]; unused when the backend samples on its device
  // Where one logits row of a device-sampling step found its samples.
  struct LogitRowRoute {
    int32_t device_first = 0;  // its first row in device_rows_
    bool forks = false;        // the request forks now: device row device_first + sample_index per sample
  };
  bool device_sampling_ = false;                // the backend samples on its device
  std::vector<DeviceSampleRow> device_rows_;    // this step's device sample rows
  std::vector<LogitRowRoute> routes_;           // [logit rows of the step]
  std::vector<SampledToken> device_sampled_;    // [device_rows_.size()] results

  int64_t steps_ = 0;
  int64_t generated_tokens_ = 0;
  int64_t prompt_tokens_computed_ = 0;

  EngineObserver* observer_ = nullptr;  // not owned; null: nothing is timed
  Clock::time_point step_time_;         // when the current step started (observer only)
  // When the current step's tokens were sampled (observer only): a token's
  // time, so a first token's time includes the prefill step that made it.
  Clock::time_point token_time_;
  int32_t step_prefill_tokens_ = 0;     // prompt tokens computed in the current step
  double step_model_s_ = 0;             // the current step's time in the backend call (StepStats::model_s)
};

}  // namespace ernie
