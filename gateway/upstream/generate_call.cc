#include "gateway/upstream/generate_call.h"

namespace ernie::gateway {

std::shared_ptr<GenerateCall> GenerateCall::Start(ernie::v1::Worker::Stub* stub,
                                                  const ernie::v1::GenerateRequest& request,
                                                  const std::string& request_id, Handlers handlers) {
  std::shared_ptr<GenerateCall> call(new GenerateCall());
  call->self_ = call;
  call->request_ = request;
  call->handlers_ = std::move(handlers);
  call->context_.AddMetadata("x-request-id", request_id);
  stub->async()->Generate(&call->context_, &call->request_, call.get());
  call->reading_ = true;
  call->StartRead(&call->response_);
  call->StartCall();
  return call;
}

void GenerateCall::ReadNext() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_ || reading_) return;
  reading_ = true;
  StartRead(&response_);
}

void GenerateCall::Cancel() { context_.TryCancel(); }

void GenerateCall::OnReadDone(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reading_ = false;
  }
  if (!ok) return;
  // Moved out first: the handler may start the next read into response_.
  const ernie::v1::GenerateResponse message = std::move(response_);
  response_.Clear();
  if (handlers_.on_message) handlers_.on_message(*this, message);
  // !ok: the stream ended; OnDone follows with the status.
}

void GenerateCall::OnDone(const grpc::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  std::shared_ptr<GenerateCall> keep_alive = std::move(self_);  // released when this returns
  Handlers handlers = std::move(handlers_);
  handlers_ = {};
  if (handlers.on_done) handlers.on_done(status);
}

}  // namespace ernie::gateway
