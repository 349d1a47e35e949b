// Which worker gets a request: the healthy one with the least load, unless
// the worker that last served the same prompt prefix is nearly as idle
// (then its prefix cache saves the prefill). Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"

namespace ernie::gateway {

struct WorkerLoadView {
  bool healthy = false;       // answered its last poll and is not draining
  int running = 0;
  int waiting = 0;
  int in_flight = 0;          // requests this gateway has open on it (fresher than the poll)
  int kv_blocks_used = 0;
  int kv_blocks_total = 0;
};

struct WorkerChoiceOptions {
  double kv_weight = 4.0;          // a full KV cache counts like this many queued requests
  double affinity_slack = 2.0;     // affinity wins when within this much of the least load...
  double affinity_slack_ratio = 0.25;  // ...or this fraction of it, whichever is larger
};

double WorkerLoadScore(const WorkerLoadView& worker, const WorkerChoiceOptions& options);

// The index of the worker to use, or nullopt when none is healthy and not
// excluded. `affinity` is the worker that last served this prefix.
std::optional<size_t> ChooseWorker(absl::Span<const WorkerLoadView> workers, absl::Span<const size_t> excluded,
                                   std::optional<size_t> affinity, const WorkerChoiceOptions& options = {});

// The affinity key of a prompt: a hash of its first 256 token ids (a
// prefix long enough to be worth caching, short enough that prompts
// sharing a system prompt share a key).
uint64_t PrefixAffinityKey(absl::Span<const int32_t> prompt_token_ids);

}  // namespace ernie::gateway
