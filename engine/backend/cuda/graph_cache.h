// Instantiated CUDA graphs of whole forward steps, keyed by the only values
// a step bakes into its launches: token count, attention work items and
// logit rows. Everything else a step varies (ids, positions, slots, block
// tables, logit row indices) lives in device buffers at fixed addresses
// (StepInputs), so one graph replays every step of the same key: decode
// steps at a batch size, or repeated prefill chunks of one length. Which
// keys get a graph is graph_admission.h's choice (the second time a key is
// seen). Not thread-safe, like the backend.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "engine/backend/cuda/graph_admission.h"

namespace ernie::cuda {

class GraphCache {
 public:
  explicit GraphCache(int max_graphs) : admission_(max_graphs) {}
  GraphCache(GraphCache&&) = default;
  GraphCache& operator=(GraphCache&&) = delete;
  ~GraphCache();

  // Runs `enqueue` (which puts one step's work on `stream`) through the graph
  // for `key`, capturing it first when GraphAdmission says so (a key seen
  // before, room in the cache); otherwise runs `enqueue` directly. A key
  // whose capture failed runs directly from then on. Errors are those of
  // `enqueue` or of the launch.
  absl::Status Run(uint64_t key, cudaStream_t stream, const std::function<absl::Status()>& enqueue);

  int size() const { return static_cast<int>(graphs_.size()); }
  int captured() const { return captured_; }  // keys with a graph (the others failed to capture)
  // Run calls so far, besides the captured() ones: replays of a graph, and
  // calls run directly (not admitted yet, or their key's capture failed).
  int64_t replays() const { return replays_; }
  int64_t direct_runs() const { return direct_runs_; }
  void set_max_graphs(int max_graphs) { admission_.set_max_graphs(max_graphs); }

  // `unsplit`: the step's attention runs without split-KV (short contexts);
  // `persistent`: the step is the one persistent decode kernel. Both change
  // the kernels a graph holds.
  static uint64_t Key(int32_t tokens, int32_t items, int32_t rows, bool unsplit = false, bool persistent = false) {
    return (uint64_t(uint32_t(tokens)) << 40) ^ (uint64_t(uint32_t(items)) << 20) ^ uint64_t(uint32_t(rows)) ^
           (uint64_t{unsplit} << 63) ^ (uint64_t{persistent} << 62);
  }

 private:
  GraphAdmission admission_;
  int captured_ = 0;
  int64_t replays_ = 0, direct_runs_ = 0;
  absl::flat_hash_map<uint64_t, cudaGraphExec_t> graphs_;  // nullptr: capture failed, run eagerly
};

}  // namespace ernie::cuda
