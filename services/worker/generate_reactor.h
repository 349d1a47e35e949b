// One Generate call: a gRPC server-stream reactor that owns the call's state
// (route_guide callback style). The engine thread hands it outputs through a
// sink and the output dispatcher (output_dispatcher.h); it writes them one message at a time, coalescing what arrives while
// a write is in flight (one pending message per sample), so a slow client
// costs bounded memory and never blocks the engine. Cancellation (client gone
// or deadline passed) aborts the request in the engine within one step.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "engine/core/engine_loop.h"
#include "ernie/v1/worker.pb.h"

namespace ernie::worker {

class GenerateReactor : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // Starts the request; the reactor deletes itself in OnDone.
  GenerateReactor(EngineLoop* engine, EngineRequest request, bool with_logprobs);

  // From the sink (on the output dispatcher's thread).
  void Enqueue(const SampleOutput& out);
  void Fail(const absl::Status& status);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  class Sink;
  void MaybeWriteLocked();  // requires mu_
  void FinishLocked(const grpc::Status& status);

  EngineLoop* engine_;
  std::string request_id_;
  bool with_logprobs_;
  int32_t num_samples_;
  std::shared_ptr<Sink> sink_;

  std::mutex mu_;
  std::vector<std::unique_ptr<v1::GenerateResponse>> pending_;  // by sample index; null when nothing waits
  v1::GenerateResponse in_flight_;      // the message being written
  bool writing_ = false;
  bool finished_ = false;               // Finish called
  int32_t samples_done_ = 0;            // samples whose final message is queued or sent
  bool engine_done_ = false;            // no more outputs will come
  std::optional<grpc::Status> final_status_;  // an error to finish with once the write in flight is done
};

}  // namespace ernie::worker
