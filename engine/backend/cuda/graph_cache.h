// Instantiated CUDA graphs of whole forward steps, keyed by the only values
// a step bakes into its launches: token count, attention work items and
// logit rows. Everything else a step varies (ids, positions, slots, block
// tables, logit row indices) lives in device buffers at fixed addresses
// (StepInputs), so one graph replays every step of the same key: decode
// steps at a batch size, or repeated prefill chunks of one length. Not
// thread-safe, like the backend.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace ernie::cuda {

class GraphCache {
 public:
  explicit GraphCache(int max_graphs) : max_graphs_(max_graphs) {}
  GraphCache(GraphCache&&) = default;
  GraphCache& operator=(GraphCache&&) = delete;
  ~GraphCache();

  // Runs `enqueue` (which puts one step's work on `stream`) through the graph
  // for `key`, capturing it first when the key is new. When the cache is
  // full, or capture fails, runs `enqueue` directly and remembers not to
  // capture that key again. Errors are those of `enqueue` or of the launch.
  absl::Status Run(uint64_t key, cudaStream_t stream, const std::function<absl::Status()>& enqueue);

  int size() const { return static_cast<int>(graphs_.size()); }
  int captured() const { return captured_; }  // keys with a graph (the others failed to capture)
  void set_max_graphs(int max_graphs) { max_graphs_ = max_graphs; }

  static uint64_t Key(int32_t tokens, int32_t items, int32_t rows) {
    return (uint64_t(uint32_t(tokens)) << 40) ^ (uint64_t(uint32_t(items)) << 20) ^ uint64_t(uint32_t(rows));
  }

 private:
  int max_graphs_;
  int captured_ = 0;
  absl::flat_hash_map<uint64_t, cudaGraphExec_t> graphs_;  // nullptr: capture failed, run eagerly
};

}  // namespace ernie::cuda
