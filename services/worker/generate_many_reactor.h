// One GenerateMany stream: the gateway's requests to this worker, started
// and cancelled on one bidirectional gRPC stream, their tokens sent back in
// one message a step (worker.proto says why).
//
// The engine thread hands each request's outputs to its sink, which posts
// them to the output dispatcher like Generate's; on the dispatcher's thread
// they are merged into the update waiting for the next write (one update per
// sample and request, so a gateway that reads slowly costs one update a
// request, not one a token). One write is in flight at a time; whatever
// arrives meanwhile goes out together in the next.
//
// A request ends with an update whose `closed` is set: after its finish, an
// error from the engine, a refusal at admission, a bad start, or a cancel
// (the engine aborts it and its abort is the last update). When the gateway
// half-closes or the stream breaks, every live request is aborted; the stream
// finishes once none is left.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "engine/core/engine_loop.h"
#include "ernie/v1/worker.pb.h"

namespace ernie::worker {

class GenerateManyReactor : public grpc::ServerBidiReactor<v1::GenerateManyRequest, v1::GenerateManyResponse> {
 public:
  // `engine` is null while the model loads (starts are refused as
  // UNAVAILABLE); `draining` refuses new starts the same way. Both outlive
  // the reactor. It deletes itself in OnDone.
  GenerateManyReactor(const std::atomic<EngineLoop*>* engine, const std::atomic<bool>* draining);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  class Sink;
  // What the sinks hold: the reactor, until OnDone clears it (the engine and
  // the dispatcher's queue may hold sinks past the stream's end).
  struct Handle {
    std::mutex mu;
    GenerateManyReactor* reactor;  // guarded by mu; null once the stream is done
  };
  struct Live {
    int32_t samples = 1;
    int32_t samples_done = 0;
    bool with_logprobs = false;
  };

  void Start(const v1::GenerateRequest& request);
  // From the sinks, on the output dispatcher's thread.
  void Deliver(const std::string& request_id, const SampleOutput& out);
  void Fail(const std::string& request_id, const absl::Status& status);

  // The update of (request, sample) waiting for the next write, made on first use.
  v1::GenerateUpdate* PendingUpdateLocked(const std::string& request_id, int32_t sample);
  void CloseLocked(const std::string& request_id, const grpc::Status& status);  // queues its last update
  // On the dispatcher's thread: write what the batch of outputs gathered
  // once the batch is over (one message a step, not the first output alone).
  void FlushAfterBatchLocked();
  void Flush();
  void AbortAllLocked();
  // The stream is cancelled or broken: abort what runs, drop what waits, finish.
  void AbandonLocked();
  void MaybeWriteLocked();
  void MaybeFinishLocked();

  const std::atomic<EngineLoop*>* engine_;
  const std::atomic<bool>* draining_;
  const std::shared_ptr<Handle> handle_;

  std::mutex mu_;  // guards everything below
  v1::GenerateManyRequest read_;                        // the message being read (gRPC's thread)
  absl::flat_hash_map<std::string, Live> live_;         // started and not yet closed
  v1::GenerateManyResponse pending_;                    // updates for the next write
  absl::flat_hash_map<std::string, std::vector<int>> pending_at_;  // request -> its updates' index in pending_, by sample
  v1::GenerateManyResponse in_flight_;                  // the message being written
  bool writing_ = false;
  bool flush_posted_ = false;  // a Flush waits for the dispatcher's batch to end
  bool reads_over_ = false;  // the gateway half-closed or the stream broke: no more starts
  bool finished_ = false;    // Finish called
};

}  // namespace ernie::worker
