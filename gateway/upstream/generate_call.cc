#include "gateway/upstream/generate_call.h"

#include "services/common/grpc_handoff.h"

namespace ernie::gateway {

std::shared_ptr<GenerateCall> GenerateCall::Start(ernie::v1::Worker::Stub* stub,
                                                  const ernie::v1::GenerateRequest& request,
                                                  const std::string& request_id, Handlers handlers,
                                                  const UpstreamTimeouts& timeouts) {
  std::shared_ptr<GenerateCall> call(new GenerateCall());
  call->self_ = call;
  call->request_ = request;
  call->handlers_ = std::move(handlers);
  call->timeouts_ = timeouts;
  call->context_.AddMetadata("x-request-id", request_id);
  if (timeouts.deadline.count() > 0) call->context_.set_deadline(std::chrono::system_clock::now() + timeouts.deadline);
  stub->async()->Generate(&call->context_, &call->request_, call.get());
  call->reading_ = true;
  call->read_started_ = std::chrono::steady_clock::now();
  HandToGrpc(call.get());
  call->StartRead(&call->response_);
  call->StartCall();
  if (timeouts.first_token.count() > 0 || timeouts.stall.count() > 0) UpstreamWatchdog::Instance().Watch(call);
  return call;
}

void GenerateCall::ReadNext() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_ || reading_) return;
  reading_ = true;
  read_started_ = std::chrono::steady_clock::now();
  HandToGrpc(this);
  StartRead(&response_);
}

void GenerateCall::Cancel() { context_.TryCancel(); }

bool GenerateCall::Overdue(std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_ || !reading_ || timed_out_) return false;
  const std::chrono::milliseconds limit = timeouts_.WaitLimit(received_);
  return limit.count() > 0 && now - read_started_ > limit;
}

void GenerateCall::TimeOut() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;
    timed_out_ = true;
  }
  context_.TryCancel();
}

void GenerateCall::OnReadDone(bool ok) {
  TakeFromGrpc(this);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reading_ = false;
    if (ok) received_ = true;
  }
  if (!ok) return;
  // Moved out first: the handler may start the next read into response_.
  const ernie::v1::GenerateResponse message = std::move(response_);
  response_.Clear();
  if (handlers_.on_message) handlers_.on_message(*this, message);
  // !ok: the stream ended; OnDone follows with the status.
}

void GenerateCall::OnDone(const grpc::Status& status) {
  TakeFromGrpc(this);
  bool timed_out = false;
  bool received = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    timed_out = timed_out_;
    received = received_;
  }
  std::shared_ptr<GenerateCall> keep_alive = std::move(self_);  // released when this returns
  Handlers handlers = std::move(handlers_);
  handlers_ = {};
  // Our own cancellation for a timeout reads as CANCELLED: say what it was.
  const grpc::Status reported = timed_out && !status.ok() ? WaitTimedOut(timeouts_, received) : status;
  if (handlers.on_done) handlers.on_done(reported);
}

}  // namespace ernie::gateway
