// Runs the delivery of engine outputs to Generate calls on a thread of its
// own. The engine thread hands each output to a request's sink; turning it
// into a proto and starting the gRPC write (which can run the transport's
// write path inline) would otherwise happen on the engine thread, between
// one GPU step and the next: with 256 streams that is most of a step. Tasks
// run one at a time in the order they were posted, so a request's outputs
// keep their order, except that tasks posted ahead (a sample's first tokens)
// run before the rest of their batch: a request that has just been admitted
// should not wait behind the other 255 streams' tokens of the same step
// before its time to first token ends.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/core/engine_types.h"

namespace ernie::worker {

class OutputDispatcher {
 public:
  // The process's dispatcher: created on first use and never destroyed, so
  // a sink the engine still holds at exit never posts to a dead queue.
  static OutputDispatcher& Shared();

  // Thread-safe; never blocks on the tasks themselves.
  void Post(std::function<void()> task);
  // Post, but ahead of the tasks posted without it that have not started.
  // Only for a sample's first output: it has no earlier task to overtake.
  void PostAhead(std::function<void()> task);
  // The task that delivers `out`: ahead when it is its sample's first
  // output (it ends that request's time to first token), else in turn.
  void PostOutput(const SampleOutput& out, std::function<void()> task);
  // Runs `task` once the batch of tasks now running (or the next, when none
  // runs) is over: a stream that gathers a step's outputs writes them in one
  // message there, instead of sending the first alone.
  void PostAfterBatch(std::function<void()> task);

 private:
  OutputDispatcher();
  void Run();

  std::mutex mu_;
  std::condition_variable ready_;                 // signalled when queue_ gains a task
  std::vector<std::function<void()>> ahead_;      // guarded by mu_; taken whole by Run, run first
  std::vector<std::function<void()>> queue_;      // guarded by mu_; taken whole by Run
  std::vector<std::function<void()>> after_;      // guarded by mu_; run when a batch is over
  std::thread thread_;                            // runs Run() for the life of the process
};

}  // namespace ernie::worker
