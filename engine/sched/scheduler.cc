#include "engine/sched/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ernie::sched {

Scheduler::Scheduler(const SchedulerConfig& config, kv::KvCacheManager* kv) : config_(config), kv_(kv) {}

absl::Status Scheduler::Add(Sequence* seq) {
  const int64_t blocks_needed = (int64_t{seq->max_total_tokens} + kv_->block_size() - 1) / kv_->block_size();
  if (blocks_needed > kv_->num_blocks())
    return absl::InvalidArgumentError(absl::StrCat("prompt plus max_tokens needs ", seq->max_total_tokens,
                                                   " tokens of KV cache; the pool holds ",
                                                   int64_t{kv_->num_blocks()} * kv_->block_size()));
  if (num_waiting() >= config_.max_waiting_sequences)
    return absl::ResourceExhaustedError(absl::StrCat("the waiting queue is full (", config_.max_waiting_sequences,
                                                     " sequences)"));
  seq->status = SequenceStatus::kWaiting;
  waiting_.emplace(KeyOf(*seq), seq);
  return absl::OkStatus();
}

void Scheduler::AddSibling(Sequence* seq) {
  seq->status = SequenceStatus::kWaiting;
  waiting_.emplace(KeyOf(*seq), seq);
}

void Scheduler::AddRunning(Sequence* seq) {
  seq->status = SequenceStatus::kRunning;
  seq->admitted_at = next_admission_++;
  running_.push_back(seq);
}

void Scheduler::Preempt(Sequence* victim, StepPlan& plan) {
  // Recompute later: free the blocks (full ones stay cached), start over.
  (void)kv_->FreeSequence(victim->id);
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  victim->num_computed_tokens = 0;
  victim->status = SequenceStatus::kWaiting;
  ++victim->num_preemptions;
  ++num_preemptions_;
  waiting_.emplace(KeyOf(*victim), victim);
  plan.preempted.push_back(victim);
}

void Scheduler::ScheduleRunning(StepPlan& plan, int32_t& budget) {
  // Iterate in admission order; victims come from the back (latest admitted),
  // which this loop has not reached yet, so a planned chunk is never undone.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    if (seq->num_planned_tokens() >= seq->max_total_tokens) {
      // Its pending token is its last (max_tokens or the model's length):
      // the engine finishes it when that token is read.
      ++i;
      continue;
    }
    const int32_t n = std::min(seq->num_uncomputed_tokens(), budget);
    bool scheduled = false;
    while (true) {
      auto slots = kv_->AllocateSlots(seq->id, seq->num_computed_tokens + n);
      if (slots.ok() && slots->has_value()) {
        scheduled = true;
        break;
      }
      // Out of blocks (or, defensively, any error): make room by preemption.
      Sequence* victim = running_.back();
      Preempt(victim, plan);
      if (victim == seq) break;
    }
    if (!scheduled) break;  // seq itself was the latest; nothing after it remains
    plan.chunks.push_back({seq, n, seq->num_computed_tokens + n == seq->num_planned_tokens()});
    plan.num_tokens += n;
    budget -= n;
    ++i;
  }
}

void Scheduler::AdmitWaiting(StepPlan& plan, int32_t& budget) {
  for (auto it = waiting_.begin(); it != waiting_.end() && budget > 0 && num_running() < config_.max_num_seqs;) {
    Sequence* seq = it->second;
    if (seq->num_pending_tokens > 0) {
      // Preempted while a launched step samples its next token: it is
      // admitted once the engine has read that token (its prompt for the
      // prefix lookup is not whole before).
      ++it;
      continue;
    }
    kv::PrefixHit hit = kv_->FindCachedPrefix(seq->tokens);
    const int32_t n = std::min(seq->num_tokens() - hit.num_cached_tokens, budget);
    auto started = kv_->StartSequence(seq->id, hit, hit.num_cached_tokens + n);
    if (!started.ok() || !started->has_value()) break;  // no room now; keep FIFO order
    it = waiting_.erase(it);
    seq->num_computed_tokens = hit.num_cached_tokens;
    if (seq->num_cached_prompt_tokens < 0) seq->num_cached_prompt_tokens = hit.num_cached_tokens;
    AddRunning(seq);
    plan.chunks.push_back({seq, n, seq->num_computed_tokens + n == seq->num_tokens()});
    plan.num_tokens += n;
    budget -= n;
  }
}

StepPlan Scheduler::Schedule() {
  StepPlan plan;
  int32_t budget = config_.max_num_batched_tokens;
  ScheduleRunning(plan, budget);
  // A step that had to preempt admits nobody: the pool is the bottleneck.
  if (plan.preempted.empty()) AdmitWaiting(plan, budget);
  return plan;
}

void Scheduler::Remove(Sequence* seq) {
  if (seq->status == SequenceStatus::kWaiting) {
    waiting_.erase(KeyOf(*seq));
  } else if (seq->status == SequenceStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), seq));
    (void)kv_->FreeSequence(seq->id);
  }
  seq->status = SequenceStatus::kFinished;
}

}  // namespace ernie::sched
