// Which forward steps get a CUDA graph (graph_cache.h). A graph pays for its
// capture and instantiation (host time several times a step's own) only
// when its shape comes back: a decode step's (tokens, items, rows) recurs
// every step at that batch size, while most steps that carry part of a
// prompt (tokens = decodes + a chunk) never recur. Capturing every new key,
// as the cache did at first, spent that cost on each one-off and filled
// the cache with them, after which decode batch sizes not yet seen ran
// eagerly for the rest of the process. So a key is captured the second
// time it is seen, while the cache has room; the first time it runs
// eagerly. Pure host logic, no CUDA: tested without a device.
#pragma once

#include <cstdint>

#include "absl/container/flat_hash_set.h"

namespace ernie::cuda {

class GraphAdmission {
 public:
  // max_remembered bounds the keys seen once that are kept (then forgotten
  // all at once: a key that recurs is seen again soon).
  explicit GraphAdmission(int max_graphs, int max_remembered = 4096)
      : max_graphs_(max_graphs), max_remembered_(max_remembered) {}

  // For a key that has no graph yet: true when it should be captured now
  // (it is then counted against max_graphs), false to run the step eagerly.
  bool ShouldCapture(uint64_t key);

  void set_max_graphs(int max_graphs) { max_graphs_ = max_graphs; }
  int admitted() const { return admitted_; }

 private:
  int max_graphs_;
  int max_remembered_;
  int admitted_ = 0;
  absl::flat_hash_set<uint64_t> seen_once_;
};

}  // namespace ernie::cuda
