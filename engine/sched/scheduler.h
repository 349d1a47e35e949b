// Continuous batching under one token budget per step (vLLM v1's scheduler):
// there are no prefill and decode phases. Each step, running sequences go
// first (decodes need 1 token, unfinished prompts take a chunk), then waiting
// sequences are admitted in priority order while the budget, max_num_seqs
// and free KV blocks allow. Long prompts are prefilled in chunks across steps,
// so decodes are never starved. When KV blocks run out, the most recently
// admitted running sequence is preempted (recomputed later; its full blocks
// stay in the prefix cache), which is normal control flow, not an error.
//
// Thread-safety: none; the engine thread owns the scheduler.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "engine/kv/kv_cache_manager.h"
#include "engine/sched/sequence.h"

namespace ernie::sched {

struct SchedulerConfig {
  int32_t max_num_seqs = 256;             // running sequences at once
  int32_t max_num_batched_tokens = 2048;  // tokens per step (the budget)
  int32_t max_waiting_sequences = 4096;   // beyond: Add refuses (the gateway answers 429)
};

// One sequence's share of a step.
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int32_t num_new_tokens = 0;       // tokens [num_computed, num_computed + this) computed now
  bool produces_logits = false;     // the chunk reaches the sequence's last token
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;     // running first (admission order), then new admissions
  std::vector<Sequence*> preempted;       // sent back to waiting this step
  int32_t num_tokens = 0;                 // sum of num_new_tokens
};

class Scheduler {
 public:
  // `kv` must outlive the scheduler.
  Scheduler(const SchedulerConfig& config, kv::KvCacheManager* kv);

  // Queues `seq` (status waiting; owned by the caller, address stable until
  // Remove). ResourceExhausted when the waiting queue is full;
  // InvalidArgument when prompt + max_tokens can never fit the KV pool.
  absl::Status Add(Sequence* seq);
  // Puts an already-running sequence (a fork whose KV the manager tracks)
  // straight into the running set. The caller checks HasRunningRoom first:
  // max_num_seqs bounds forks too.
  void AddRunning(Sequence* seq);
  // Queues a sibling of an accepted request (n > 1) that could not fork into
  // the running set (no room under max_num_seqs, or no block for its tail):
  // it recomputes its prompt later, the full blocks coming back from the
  // prefix cache. Not refused when the waiting queue is full: its request
  // was accepted whole, and a sibling lost here would never finish it.
  void AddSibling(Sequence* seq);
  // Whether another sequence may run now (max_num_seqs).
  bool HasRunningRoom() const { return num_running() < config_.max_num_seqs; }

  // Plans one step. Reserves KV slots for every chunk in the plan; the caller
  // runs the backend and then commits computed tokens.
  StepPlan Schedule();

  // Takes `seq` out wherever it is and frees its KV (finished or aborted).
  void Remove(Sequence* seq);

  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  using WaitKey = std::tuple<int32_t, uint64_t, kv::SequenceId>;  // priority, arrival, id
  static WaitKey KeyOf(const Sequence& s) { return {s.priority, s.arrival, s.id}; }

  void ScheduleRunning(StepPlan& plan, int32_t& budget);
  void AdmitWaiting(StepPlan& plan, int32_t& budget);
  void Preempt(Sequence* victim, StepPlan& plan);

  SchedulerConfig config_;
  kv::KvCacheManager* kv_;                 // not owned
  std::map<WaitKey, Sequence*> waiting_;   // admission order
  std::vector<Sequence*> running_;         // ascending admitted_at
  uint64_t next_admission_ = 1;            // counter for Sequence::admitted_at
  int64_t num_preemptions_ = 0;
};

}  // namespace ernie::sched
