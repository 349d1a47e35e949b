#include "services/worker/generate_many_reactor.h"

#include "absl/strings/str_cat.h"
#include "services/common/grpc_handoff.h"
#include "services/worker/grpc_status.h"
#include "services/worker/output_dispatcher.h"
#include "services/worker/proto_convert.h"

namespace ernie::worker {

// One request's sink: the engine thread only copies each output into the
// dispatcher's queue (PostOutput: a sample's first output ahead of the
// rest); the merge into the stream's next message happens there.
class GenerateManyReactor::Sink : public RequestSink {
 public:
  Sink(std::shared_ptr<Handle> handle, std::string request_id)
      : handle_(std::move(handle)), request_id_(std::move(request_id)) {}

  void OnOutput(const SampleOutput& out) override {
    auto deliver = [handle = handle_, id = request_id_, out] {
      std::lock_guard<std::mutex> lock(handle->mu);
      if (handle->reactor != nullptr) handle->reactor->Deliver(id, out);
    };
    OutputDispatcher::Shared().PostOutput(out, std::move(deliver));
  }
  void OnError(const absl::Status& status) override {
    OutputDispatcher::Shared().Post([handle = handle_, id = request_id_, status] {
      std::lock_guard<std::mutex> lock(handle->mu);
      if (handle->reactor != nullptr) handle->reactor->Fail(id, status);
    });
  }

 private:
  const std::shared_ptr<Handle> handle_;
  const std::string request_id_;
};

GenerateManyReactor::GenerateManyReactor(const std::atomic<EngineLoop*>* engine, const std::atomic<bool>* draining)
    : engine_(engine), draining_(draining), handle_(std::make_shared<Handle>()) {
  handle_->reactor = this;
  HandToGrpc(this);
  StartRead(&read_);
}

void GenerateManyReactor::OnReadDone(bool ok) {
  TakeFromGrpc(this);
  std::unique_lock<std::mutex> lock(mu_);
  if (!ok) {
    // The gateway half-closed (or the stream broke): nobody is left to read
    // what the running requests make.
    reads_over_ = true;
    AbortAllLocked();
    MaybeFinishLocked();
    return;
  }
  if (finished_) return;
  if (read_.has_start()) {
    lock.unlock();
    Start(read_.start());
    lock.lock();
  } else if (read_.action_case() == v1::GenerateManyRequest::kCancelRequestId) {
    EngineLoop* engine = engine_->load();
    if (engine != nullptr && live_.contains(read_.cancel_request_id())) engine->Abort(read_.cancel_request_id());
  }
  if (finished_) return;
  HandToGrpc(this);
  StartRead(&read_);
}

void GenerateManyReactor::Start(const v1::GenerateRequest& request) {
  EngineLoop* engine = engine_->load();
  std::lock_guard<std::mutex> lock(mu_);
  const std::string& id = request.request_id();
  if (id.empty()) {
    CloseLocked(id, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "start.request_id is required on a GenerateMany stream"));
    return MaybeWriteLocked();
  }
  if (live_.contains(id)) {
    // Not CloseLocked: that would end the running request of the same id.
    v1::GenerateUpdate* update = pending_.add_updates();
    update->set_request_id(id);
    update->set_closed(true);
    update->set_status_code(grpc::StatusCode::ALREADY_EXISTS);
    update->set_status_message(absl::StrCat("request_id '", id, "' is already running on this stream"));
    return MaybeWriteLocked();
  }
  if (engine == nullptr || draining_->load()) {
    CloseLocked(id, grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 engine == nullptr ? "the model is still loading" : "the worker is draining"));
    return MaybeWriteLocked();
  }
  EngineRequest engine_request = FromProto(request);
  Live& live = live_[id];
  live.samples = engine_request.sampling.n;
  live.with_logprobs = engine_request.sampling.logprobs;
  auto sink = std::make_shared<Sink>(handle_, id);
  engine_request.sink = sink;
  // A refusal at admission (queue full, too long, bad sampling) comes back
  // through the sink, so the engine thread never touches the stream.
  engine->SubmitAsync(std::move(engine_request), [sink](const absl::Status& verdict) {
    if (!verdict.ok()) sink->OnError(verdict);
  });
}

void GenerateManyReactor::Deliver(const std::string& request_id, const SampleOutput& out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  auto it = live_.find(request_id);
  if (it == live_.end()) return;  // closed already (cancelled, failed)
  Live& live = it->second;
  v1::GenerateUpdate* update = PendingUpdateLocked(request_id, out.index);
  MergeInto(out, live.with_logprobs, update->mutable_response());
  // The closing update goes after the request's others in the message: on
  // its own sample's update it could precede another sample's last tokens,
  // which the gateway would then drop (n > 1, samples ending out of order).
  if (out.finish_reason != FinishReason::kNone && ++live.samples_done == live.samples)
    CloseLocked(request_id, grpc::Status::OK);
  FlushAfterBatchLocked();
}

void GenerateManyReactor::Fail(const std::string& request_id, const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || !live_.contains(request_id)) return;
  CloseLocked(request_id, ToGrpcStatus(status));
  FlushAfterBatchLocked();
}

void GenerateManyReactor::FlushAfterBatchLocked() {
  if (flush_posted_) return;
  flush_posted_ = true;
  OutputDispatcher::Shared().PostAfterBatch([handle = handle_] {
    std::lock_guard<std::mutex> lock(handle->mu);
    if (handle->reactor != nullptr) handle->reactor->Flush();
  });
}

void GenerateManyReactor::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  flush_posted_ = false;
  MaybeWriteLocked();
  MaybeFinishLocked();
}

v1::GenerateUpdate* GenerateManyReactor::PendingUpdateLocked(const std::string& request_id, int32_t sample) {
  std::vector<int>& at = pending_at_[request_id];
  if (static_cast<size_t>(sample) >= at.size()) at.resize(static_cast<size_t>(sample) + 1, -1);
  int& index = at[static_cast<size_t>(sample)];
  if (index < 0) {
    index = pending_.updates_size();
    pending_.add_updates()->set_request_id(request_id);
  }
  return pending_.mutable_updates(index);
}

void GenerateManyReactor::CloseLocked(const std::string& request_id, const grpc::Status& status) {
  live_.erase(request_id);
  pending_at_.erase(request_id);  // later updates of this id would follow the closing one
  v1::GenerateUpdate* update = pending_.add_updates();
  update->set_request_id(request_id);
  update->set_closed(true);
  update->set_status_code(status.error_code());
  update->set_status_message(status.error_message());
}

void GenerateManyReactor::AbortAllLocked() {
  EngineLoop* engine = engine_->load();
  if (engine == nullptr) return;
  // Their abort outputs close them (Deliver), or find the stream finished.
  for (const auto& [id, live] : live_) engine->Abort(id);
}

void GenerateManyReactor::MaybeWriteLocked() {
  if (finished_ || writing_ || pending_.updates_size() == 0) return;
  in_flight_.Clear();
  in_flight_.Swap(&pending_);
  pending_at_.clear();
  writing_ = true;
  HandToGrpc(this);
  StartWrite(&in_flight_);
}

void GenerateManyReactor::MaybeFinishLocked() {
  if (finished_ || !reads_over_ || writing_ || !live_.empty() || pending_.updates_size() > 0) return;
  finished_ = true;
  HandToGrpc(this);  // after the last read of our state: OnDone may delete it
  Finish(grpc::Status::OK);
}

void GenerateManyReactor::OnWriteDone(bool ok) {
  TakeFromGrpc(this);
  std::lock_guard<std::mutex> lock(mu_);
  writing_ = false;
  if (!ok) return AbandonLocked();  // the stream broke: what waits can never be sent
  // While the dispatcher gathers a batch, its flush writes; else what
  // arrived during this write goes now.
  if (!flush_posted_) MaybeWriteLocked();
  MaybeFinishLocked();
}

void GenerateManyReactor::OnCancel() {
  TakeFromGrpc(this);
  std::lock_guard<std::mutex> lock(mu_);
  AbandonLocked();
}

void GenerateManyReactor::AbandonLocked() {
  reads_over_ = true;
  AbortAllLocked();
  live_.clear();
  pending_.Clear();
  pending_at_.clear();
  MaybeFinishLocked();
}

void GenerateManyReactor::OnDone() {
  TakeFromGrpc(this);
  {
    std::lock_guard<std::mutex> lock(handle_->mu);
    handle_->reactor = nullptr;
  }
  delete this;
}

}  // namespace ernie::worker
