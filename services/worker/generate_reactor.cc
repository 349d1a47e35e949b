#include "services/worker/generate_reactor.h"

#include "services/common/grpc_handoff.h"
#include "services/worker/grpc_status.h"
#include "services/worker/output_dispatcher.h"
#include "services/worker/proto_convert.h"

namespace ernie::worker {

// Forwards engine outputs to the reactor until the reactor is done; after
// that the engine may still hold the sink (it outlives the reactor). The
// engine thread only copies each output into the dispatcher's queue; the
// proto and the gRPC write happen on the dispatcher's thread.
class GenerateReactor::Sink : public RequestSink, public std::enable_shared_from_this<Sink> {
 public:
  explicit Sink(GenerateReactor* reactor) : reactor_(reactor) {}
  void OnOutput(const SampleOutput& out) override {
    auto deliver = [self = shared_from_this(), out] {
      std::lock_guard<std::mutex> lock(self->mu_);
      if (self->reactor_ != nullptr) self->reactor_->Enqueue(out);
    };
    OutputDispatcher::Shared().PostOutput(out, std::move(deliver));
  }
  void OnError(const absl::Status& status) override {
    OutputDispatcher::Shared().Post([self = shared_from_this(), status] {
      std::lock_guard<std::mutex> lock(self->mu_);
      if (self->reactor_ != nullptr) self->reactor_->Fail(status);
    });
  }
  void Detach() {
    std::lock_guard<std::mutex> lock(mu_);
    reactor_ = nullptr;
  }

 private:
  std::mutex mu_;
  GenerateReactor* reactor_;  // guarded by mu_; null once the call is done
};

GenerateReactor::GenerateReactor(EngineLoop* engine, EngineRequest request, bool with_logprobs)
    : engine_(engine),
      request_id_(request.request_id),
      with_logprobs_(with_logprobs),
      num_samples_(request.sampling.n),
      sink_(std::make_shared<Sink>(this)) {
  pending_.resize(static_cast<size_t>(std::max(1, num_samples_)));
  request.sink = sink_;
  // Refused at admission: nothing was streamed, the status says why. It goes
  // through the sink like every other engine event, so the engine thread
  // never calls into gRPC (Finish) itself.
  engine_->SubmitAsync(std::move(request), [sink = sink_](const absl::Status& verdict) {
    if (!verdict.ok()) sink->OnError(verdict);
  });
  HandToGrpc(this);  // returned to gRPC, which calls OnCancel / OnWriteDone / OnDone
}

void GenerateReactor::Enqueue(const SampleOutput& out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  auto& slot = pending_[static_cast<size_t>(out.index)];
  if (slot == nullptr) slot = std::make_unique<v1::GenerateResponse>();
  MergeInto(out, with_logprobs_, slot.get());
  if (out.finish_reason != FinishReason::kNone && ++samples_done_ == num_samples_) engine_done_ = true;
  MaybeWriteLocked();
}

void GenerateReactor::Fail(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  engine_done_ = true;
  FinishLocked(ToGrpcStatus(status));
}

void GenerateReactor::MaybeWriteLocked() {
  if (finished_ || writing_) return;
  for (auto& slot : pending_) {
    if (slot == nullptr) continue;
    in_flight_ = std::move(*slot);
    slot.reset();
    writing_ = true;
    HandToGrpc(this);
    StartWrite(&in_flight_);
    return;
  }
  if (engine_done_) FinishLocked(grpc::Status::OK);
}

void GenerateReactor::FinishLocked(const grpc::Status& status) {
  if (finished_) return;
  if (!status.ok()) {
    final_status_ = status;
    for (auto& slot : pending_) slot.reset();  // an error ends the stream: drop what waits
  }
  if (writing_) return;  // OnWriteDone finishes with final_status_
  finished_ = true;
  const grpc::Status status_to_send = final_status_.value_or(grpc::Status::OK);
  HandToGrpc(this);  // after the last read of our state: OnDone may delete it
  Finish(status_to_send);
}

void GenerateReactor::OnWriteDone(bool ok) {
  TakeFromGrpc(this);
  std::lock_guard<std::mutex> lock(mu_);
  writing_ = false;
  if (!ok) {  // the stream broke: the client is gone
    engine_->Abort(request_id_);
    engine_done_ = true;
    for (auto& slot : pending_) slot.reset();
    finished_ = true;
    HandToGrpc(this);
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
    return;
  }
  MaybeWriteLocked();
}

void GenerateReactor::OnCancel() {
  TakeFromGrpc(this);
  engine_->Abort(request_id_);
}

void GenerateReactor::OnDone() {
  TakeFromGrpc(this);
  sink_->Detach();
  delete this;
}

}  // namespace ernie::worker
