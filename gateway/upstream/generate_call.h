// One Worker.Generate server stream on gRPC's callback API: no thread per
// stream. The consumer pulls: after each message it calls ReadNext when it
// wants the next one (so a slow HTTP reader slows only its own stream, and
// the worker coalesces tokens meanwhile). Cancel() ends the call at once;
// the worker sees the cancellation and aborts the sequence.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "ernie/v1/worker.grpc.pb.h"
#include "gateway/upstream/upstream_call.h"
#include "gateway/upstream/upstream_timeouts.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"

namespace ernie::gateway {

class GenerateCall : public UpstreamCall,
                     public grpc::ClientReadReactor<ernie::v1::GenerateResponse>,
                     public WatchedCall {
 public:

  // Starts the call and the first read. `request_id` goes out as metadata
  // "x-request-id". A call that waits for the worker longer than `timeouts`
  // allow ends with DEADLINE_EXCEEDED (the watchdog cancels it).
  static std::shared_ptr<GenerateCall> Start(ernie::v1::Worker::Stub* stub, const ernie::v1::GenerateRequest& request,
                                             const std::string& request_id, Handlers handlers,
                                             const UpstreamTimeouts& timeouts = {});

  void ReadNext() override;
  void Cancel() override;

  // Reactor callbacks (gRPC's threads).
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  // WatchedCall (the watchdog's thread).
  bool Overdue(std::chrono::steady_clock::time_point now) override;
  void TimeOut() override;

 private:
  GenerateCall() = default;

  grpc::ClientContext context_;
  ernie::v1::GenerateRequest request_;
  ernie::v1::GenerateResponse response_;  // the message being read
  Handlers handlers_;
  std::mutex mutex_;
  bool done_ = false;     // OnDone ran: no more reads may start
  bool reading_ = false;  // a StartRead is outstanding
  UpstreamTimeouts timeouts_;
  std::chrono::steady_clock::time_point read_started_;  // when the outstanding read began
  bool received_ = false;   // a message arrived (the first-token limit is over)
  bool timed_out_ = false;  // TimeOut() cancelled the call: report DEADLINE_EXCEEDED
  std::shared_ptr<GenerateCall> self_;  // keeps the reactor alive until OnDone
};

}  // namespace ernie::gateway
