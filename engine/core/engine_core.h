// The engine: one step is schedule -> launch -> update from output (vLLM's
// EngineCore.step()). Owns the scheduler, the KV block bookkeeping, the
// sampler and every live request; drives a Backend it does not own.
//
// Overlapped steps (EngineConfig::overlap_steps, with a backend whose device
// runs behind the host): the engine plans and launches step N+1 before it
// reads step N's tokens, so the host's work between steps (scheduling,
// building the batch, delivering tokens) hides behind the device's. A
// decode in step N+1 then takes its input token from step N's samples on
// the device (Sequence::num_pending_tokens, StepBatch::fed_back_tokens); a
// sequence that step N finishes has its row in step N+1 computed and
// dropped. A step whose rows need their tokens on the host to plan the next
// (logit_bias or penalties: their edits follow the outputs) is read in the
// Step() that launched it, as without overlap.
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
  // Overlap the host's work with the device's (see above); applies only to
  // a backend whose OverlapsSteps() is true.
  bool overlap_steps = true;
};

class EngineCore {
 public:
  // `backend` must outlive the engine; its KV shape sizes the block pool.
  static absl::StatusOr<std::unique_ptr<EngineCore>> Create(Backend* backend, const EngineConfig& config);
  // Waits for a launched step it has not read (its tokens are dropped).
  ~EngineCore();

  // Validates and queues a request. InvalidArgument (bad prompt or sampling
  // field, named), AlreadyExists (request id live), ResourceExhausted (the
  // waiting queue is full). On error nothing is queued and the sink is not called.
  absl::Status AddRequest(EngineRequest request);
  // Ends a request wherever it is; its sink gets finish_reason abort for every
  // unfinished sample. Returns false when no such request is live.
  bool Abort(const std::string& request_id);
  // Aborts every live request (shutdown).
  void AbortAll();

  // Runs one step (with overlapped steps: launches one and reads the one
  // before); false when there was nothing to do.
  bool Step();
  bool HasWork() const {
    return scheduler_->num_running() + scheduler_->num_waiting() > 0 || in_flight_.has_value();
  }
  // Whether steps overlap (EngineConfig::overlap_steps and the backend).
  bool overlaps_steps() const { return overlap_; }

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
    // Its device sample row in the most recent launch (the next launch's
    // fed-back token when that step is still unread).
    int32_t launched_row = -1;
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
    bool fork_launched = false;  // the step whose row its n > 1 siblings sample from is launched
    Clock::time_point arrival_time;                      // EngineRequest::arrival_time, else AddRequest
    std::optional<Clock::time_point> first_scheduled_time;  // its first chunk in a batch
  };

  // Where one logits row of a device-sampling step found its samples.
  struct LogitRowRoute {
    int32_t device_first = 0;  // its first device sample row
    bool forks = false;        // the request forks now: device row device_first + sample_index per sample
  };
  // One chunk of a launched step, by sequence id: by the time its results
  // are read the sequence may have finished, or been aborted or preempted.
  struct LaunchedChunk {
    kv::SequenceId seq = 0;
    int32_t prefill_tokens = 0;   // prompt tokens it computes
    int32_t computed_after = 0;   // the sequence's computed tokens once it is written
    int32_t preemptions = 0;      // Sequence::num_preemptions at launch (changed: its KV is gone)
    int32_t logit_row = -1;       // its logits row, or -1
    bool forks = false;           // an n > 1 parent's prompt is done: its siblings sample this row too
  };
  // A launched step, until its tokens are read.
  struct LaunchedStep {
    std::vector<LaunchedChunk> chunks;
    std::vector<LogitRowRoute> routes;         // device sampling: [logits rows]
    std::vector<SampledToken> device_sampled;  // device sampling: [device sample rows]
    bool read = false;                 // device_sampled is filled (no WaitForSamples to do)
    bool needs_tokens_to_plan = false; // a row's next step needs this step's token on the host
    int32_t num_tokens = 0;
    int32_t num_prefill_tokens = 0;
    Clock::time_point start;           // when its Step began (observer only)
    double model_s = 0;                // time in the backend's launch and wait (StepStats::model_s)
  };

  EngineCore(Backend* backend, const EngineConfig& config, kv::KvCacheManager kv, Sampler sampler);

  // Builds the plan's batch, advances its sequences (computed tokens at
  // launch; pending tokens for rows that sample) and hands it to the
  // backend. On a failed launch the plan's requests fail and nullopt returns.
  std::optional<LaunchedStep> Launch(const sched::StepPlan& plan);
  // Reads a launched step's tokens (waiting for them if need be) and applies
  // them: KV commits, forks, tokens appended, stops, delivery.
  void Complete(LaunchedStep& step);
  void Apply(LaunchedStep& step);  // Complete's work, but the step's count and stats
  void CompleteInFlight();
  // Whether `slot`'s logits row in the step being launched is the one its
  // n > 1 siblings fork from.
  static bool ForksNow(const RequestState& req, const SampleSlot& slot);
  // Forks the parent's n-1 siblings from its prompt (`prompt_computed`
  // tokens); returns the slots that sample now.
  void ForkSiblings(RequestState& req, int32_t prompt_computed, std::vector<SampleSlot*>& rows,
                    std::vector<int32_t>& row_logits);
  // Device sampling (backends with SupportsDeviceSampling()): the device
  // sample rows of the step being launched, one per logits row (n per row of
  // a request forking now), with their edits and min_tokens bans.
  void PlanDeviceSampling(LaunchedStep& step);
  // Gives `slot` its logit edits when its rows will be edited on the device.
  void StartLogitEdits(const RequestState& req, SampleSlot& slot) const;
  // One SampledToken per row: the device's results, or the host Sampler's
  // on logits_ when the backend does not sample on its device.
  absl::StatusOr<std::vector<SampledToken>> SampleRows(LaunchedStep& step, const std::vector<SampleSlot*>& rows,
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

  // Launch scratch, reused (no per-step allocation once warm).
  std::vector<int32_t> tokens_, positions_, logit_rows_;
  std::vector<SequenceSlice> slices_;
  std::vector<FedBackToken> fed_back_;
  std::vector<float> logits_;  // [logit rows, vocab]; unused when the backend samples on its device
  bool device_sampling_ = false;              // the backend samples on its device
  bool overlap_ = false;                      // steps overlap (config and backend)
  std::vector<DeviceSampleRow> device_rows_;  // the launching step's device sample rows
  std::optional<LaunchedStep> in_flight_;     // launched, tokens not yet read (overlapped steps only)

  int64_t steps_ = 0;
  int64_t generated_tokens_ = 0;
  int64_t prompt_tokens_computed_ = 0;

  EngineObserver* observer_ = nullptr;  // not owned; null: nothing is timed
  Clock::time_point step_time_;         // when the current Step began (observer only)
  // When the step being read had its tokens read (observer only): a token's
  // time, so a first token's time includes the prefill step that made it.
  Clock::time_point token_time_;
  Clock::time_point last_read_time_;    // when the last step was read (observer only)
};

}  // namespace ernie
