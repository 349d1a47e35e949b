#include "gateway/upstream/worker_choice.h"

#include <algorithm>

namespace ernie::gateway {

double WorkerLoadScore(const WorkerLoadView& worker, const WorkerChoiceOptions& options) {
  const double queued = std::max(worker.running + worker.waiting, worker.in_flight);
  const double kv = worker.kv_blocks_total > 0
                        ? static_cast<double>(worker.kv_blocks_used) / static_cast<double>(worker.kv_blocks_total)
                        : 0.0;
  return queued + options.kv_weight * kv;
}

std::optional<size_t> ChooseWorker(absl::Span<const WorkerLoadView> workers, absl::Span<const size_t> excluded,
                                   std::optional<size_t> affinity, const WorkerChoiceOptions& options) {
  auto usable = [&](size_t i) {
    return i < workers.size() && workers[i].healthy &&
           std::find(excluded.begin(), excluded.end(), i) == excluded.end();
  };
  std::optional<size_t> best;
  double best_score = 0;
  for (size_t i = 0; i < workers.size(); ++i) {
    if (!usable(i)) continue;
    const double score = WorkerLoadScore(workers[i], options);
    if (!best || score < best_score) {
      best = i;
      best_score = score;
    }
  }
  if (best && affinity && usable(*affinity)) {
    const double slack = std::max(options.affinity_slack, options.affinity_slack_ratio * best_score);
    if (WorkerLoadScore(workers[*affinity], options) <= best_score + slack) return affinity;
  }
  return best;
}

uint64_t PrefixAffinityKey(absl::Span<const int32_t> prompt_token_ids) {
  // FNV-1a over the ids' bytes: stable across processes and runs.
  uint64_t hash = 1469598103934665603ull;
  const size_t count = std::min<size_t>(prompt_token_ids.size(), 256);
  for (size_t i = 0; i < count; ++i) {
    const uint32_t id = static_cast<uint32_t>(prompt_token_ids[i]);
    for (int b = 0; b < 4; ++b) {
      hash ^= (id >> (8 * b)) & 0xffu;
      hash *= 1099511628211ull;
    }
  }
  return hash;
}

}  // namespace ernie::gateway
