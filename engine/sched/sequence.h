// One sequence the scheduler moves between waiting and running: a prompt and
// the tokens generated after it. A request with n > 1 samples owns n of them.
// The engine core owns Sequence objects (stable addresses); the scheduler
// keeps pointers and decides, per step, how many tokens each computes.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kv/kv_cache_manager.h"

namespace ernie::sched {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  kv::SequenceId id = 0;
  int64_t request_slot = 0;         // the owning request in the engine core's table
  int32_t sample_index = 0;         // which of the request's n samples
  int32_t priority = 0;             // lower runs first
  uint64_t arrival = 0;             // FIFO order within a priority; kept across preemption
  std::vector<int32_t> tokens;      // prompt, then generated tokens
  int32_t num_prompt_tokens = 0;
  int32_t num_computed_tokens = 0;  // KV written (or being written by a launched step) for tokens [0, this)
  // Tokens sampled by a launched step that the host has not read yet (0 or
  // 1). With overlapped steps the engine plans the next step before the
  // current one returns, so a decode's input can be such a token: the
  // backend feeds it from its own sample buffer (StepBatch::fed_back_tokens).
  int32_t num_pending_tokens = 0;
  int32_t num_cached_prompt_tokens = -1;  // prefix-cache hit at first admission; -1 before
  int32_t max_total_tokens = 0;     // prompt + max_tokens (capped by the model length)
  uint64_t admitted_at = 0;         // admission counter: the latest admitted is preempted first
  int32_t num_preemptions = 0;
  SequenceStatus status = SequenceStatus::kWaiting;

  // Tokens the host knows (prompt and read outputs).
  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  // Known tokens plus those sampled but not yet read: what the scheduler plans with.
  int32_t num_planned_tokens() const { return num_tokens() + num_pending_tokens; }
  // Tokens still to compute before this sequence can produce its next token.
  int32_t num_uncomputed_tokens() const { return num_planned_tokens() - num_computed_tokens; }
};

}  // namespace ernie::sched
