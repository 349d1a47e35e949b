#include "gateway/upstream/multiplexed_call.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_handoff.h"

namespace ernie::gateway {
namespace {

// The key of the hand-off to a cancelled call's alarm (grpc_handoff.h): one
// for all of them, since the callback cannot read its capture before it.
const char kAlarmHandoff = 0;

}  // namespace

// ---------------------------------------------------------------- WorkerStream

std::shared_ptr<WorkerStream> WorkerStream::Open(ernie::v1::Worker::Stub* stub) {
  std::shared_ptr<WorkerStream> stream(new WorkerStream());
  stream->self_ = stream;
  stub->async()->GenerateMany(&stream->context_, stream.get());
  // Starts and cancels are written from outside the reactions (the requests'
  // threads): a hold keeps the stream until no more can come (OnReadDone).
  stream->AddHold();
  HandToGrpc(stream.get());
  stream->StartRead(&stream->read_);
  stream->StartCall();
  return stream;
}

bool WorkerStream::Start(const ernie::v1::GenerateRequest& request, const std::shared_ptr<MultiplexedCall>& call) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_) return false;
  calls_[request.request_id()] = call;
  ernie::v1::GenerateManyRequest start;
  *start.mutable_start() = request;
  outbox_.push_back(std::move(start));
  MaybeWriteLocked();
  return true;
}

void WorkerStream::Cancel(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_ || !calls_.contains(request_id)) return;  // over already
  ernie::v1::GenerateManyRequest cancel;
  cancel.set_cancel_request_id(request_id);
  outbox_.push_back(std::move(cancel));
  MaybeWriteLocked();
}

void WorkerStream::Close() { context_.TryCancel(); }

bool WorkerStream::ended() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ended_;
}

void WorkerStream::MaybeWriteLocked() {
  if (writing_ || outbox_.empty() || ended_) return;
  in_flight_ = std::move(outbox_.front());
  outbox_.pop_front();
  writing_ = true;
  HandToGrpc(this);
  StartWrite(&in_flight_);
}

void WorkerStream::OnWriteDone(bool ok) {
  TakeFromGrpc(this);
  std::lock_guard<std::mutex> lock(mutex_);
  writing_ = false;
  if (ok) MaybeWriteLocked();
  // !ok: the stream broke; the failed read ends it (OnReadDone, then OnDone).
}

void WorkerStream::OnReadDone(bool ok) {
  TakeFromGrpc(this);
  if (!ok) {
    // The stream is over: no more writes may start; OnDone brings the status.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ended_ = true;
      outbox_.clear();
    }
    RemoveHold();
    return;
  }
  // Each update to its request, in order; a request's updates all come on
  // this stream, and the next read starts only after these are handed over.
  std::vector<std::pair<std::shared_ptr<MultiplexedCall>, const ernie::v1::GenerateUpdate*>> routed;
  routed.reserve(static_cast<size_t>(read_.updates_size()));
  {
    std::lock_guard<std::mutex> lock(mutex_);  // once a message, not once an update
    for (const ernie::v1::GenerateUpdate& update : read_.updates()) {
      auto it = calls_.find(update.request_id());
      if (it == calls_.end()) continue;  // unknown, or ended here already
      std::shared_ptr<MultiplexedCall> call = it->second.lock();
      if (update.closed() || call == nullptr) calls_.erase(it);
      if (call != nullptr) routed.emplace_back(std::move(call), &update);
    }
  }
  for (auto& [call, update] : routed) call->OnUpdate(*update);
  read_.Clear();
  HandToGrpc(this);
  StartRead(&read_);
}

void WorkerStream::OnDone(const grpc::Status& status) {
  TakeFromGrpc(this);
  absl::flat_hash_map<std::string, std::weak_ptr<MultiplexedCall>> open;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ended_ = true;
    open.swap(calls_);
  }
  // A stream that ends under open requests failed them: the worker went
  // away (UNAVAILABLE: retried elsewhere when nothing was received yet).
  const grpc::Status reported =
      status.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the worker ended the GenerateMany stream") : status;
  for (auto& [id, weak] : open) {
    if (auto call = weak.lock()) call->OnStreamEnded(reported);
  }
  std::shared_ptr<WorkerStream> keep_alive = std::move(self_);  // released when this returns
}

// ----------------------------------------------------------- MultiplexedWorker

MultiplexedWorker::MultiplexedWorker(ernie::v1::Worker::Stub* stub, int streams)
    : stub_(stub), streams_(static_cast<size_t>(std::max(1, streams))) {}

MultiplexedWorker::~MultiplexedWorker() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& stream : streams_)
    if (stream != nullptr) stream->Close();
}

std::shared_ptr<WorkerStream> MultiplexedWorker::NextStream() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<WorkerStream>& stream = streams_[next_++ % streams_.size()];
  if (stream == nullptr || stream->ended()) stream = WorkerStream::Open(stub_);
  return stream;
}

// ------------------------------------------------------------- MultiplexedCall

std::shared_ptr<MultiplexedCall> MultiplexedCall::Start(MultiplexedWorker& worker,
                                                        const ernie::v1::GenerateRequest& request, Handlers handlers,
                                                        const UpstreamTimeouts& timeouts) {
  std::shared_ptr<MultiplexedCall> call(new MultiplexedCall());
  call->self_ = call;
  call->request_id_ = request.request_id();
  call->handlers_ = std::move(handlers);
  call->timeouts_ = timeouts;
  call->started_ = call->wait_started_ = std::chrono::steady_clock::now();
  // A stream found open can end before the start is queued: then the next.
  bool started = false;
  for (int attempt = 0; attempt < 2 && !started; ++attempt) {
    std::shared_ptr<WorkerStream> stream = worker.NextStream();
    {
      std::lock_guard<std::mutex> lock(call->mutex_);
      call->stream_ = stream;
    }
    started = stream->Start(request, call);
  }
  if (!started) {
    call->OnStreamEnded(grpc::Status(grpc::StatusCode::UNAVAILABLE, "no GenerateMany stream to the worker"));
    return call;
  }
  if (timeouts.first_token.count() > 0 || timeouts.stall.count() > 0 || timeouts.deadline.count() > 0)
    UpstreamWatchdog::Instance().Watch(call);
  return call;
}

void MultiplexedCall::OnUpdate(const ernie::v1::GenerateUpdate& update) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (done_) return;
  if (update.has_response()) {
    received_ = true;
    const ernie::v1::GenerateResponse& response = update.response();
    // A later message of the same sample appends its tokens (and logprobs)
    // and takes the latest counts; finish_reason and stop_token_id are set
    // only on the last: proto3's MergeFrom is exactly that merge.
    pending_[response.index()].MergeFrom(response);
  }
  if (update.closed()) EndLocked(grpc::Status(static_cast<grpc::StatusCode>(update.status_code()), update.status_message()));
  Pump(lock);
}

void MultiplexedCall::OnStreamEnded(const grpc::Status& status) {
  std::unique_lock<std::mutex> lock(mutex_);
  EndLocked(status);
  Pump(lock);
}

void MultiplexedCall::ReadNext() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (done_ || waiting_) return;
  waiting_ = true;
  wait_started_ = std::chrono::steady_clock::now();
  Pump(lock);
}

void MultiplexedCall::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_ || abandoned_) return;
    abandoned_ = true;
    EndLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the gateway"));
  }
  CancelUpstream();
  // The caller may hold the lock its on_done takes (the job cancels under
  // its own): the end is delivered from a gRPC thread, now. The callback
  // holds the call weakly: gRPC keeps an alarm's callback until the alarm
  // itself is destroyed, and the alarm is this call's member, so a strong
  // capture was a cycle that kept every cancelled call (every finished
  // group cancels its call) and its alarm alive for good (the soak's gateway
  // grew 40% in 25 minutes; heaptrack found the calls). Until the end
  // is delivered self_ keeps the call alive, so the lock fails only if
  // another thread delivered it first.
  std::function<void(bool)> fire = [weak = std::weak_ptr<MultiplexedCall>(std::static_pointer_cast<MultiplexedCall>(
                                        shared_from_this()))](bool) {
    TakeFromGrpc(&kAlarmHandoff);  // before the capture is read
    const std::shared_ptr<MultiplexedCall> self = weak.lock();
    if (self == nullptr) return;
    std::unique_lock<std::mutex> lock(self->mutex_);
    self->Pump(lock);
  };
  HandToGrpc(&kAlarmHandoff);  // after `fire` is built
  defer_.Set(std::chrono::system_clock::now(), std::move(fire));
}

bool MultiplexedCall::Overdue(std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_ || end_) return false;
  if (timeouts_.deadline.count() > 0 && now - started_ > timeouts_.deadline) return true;
  // Only the time spent waiting for the worker counts (a slow reader's pause does not).
  if (!waiting_ || !pending_.empty()) return false;
  const std::chrono::milliseconds limit = timeouts_.WaitLimit(received_);
  return limit.count() > 0 && now - wait_started_ > limit;
}

void MultiplexedCall::TimeOut() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_ || end_) return;
    abandoned_ = true;
    const auto now = std::chrono::steady_clock::now();
    if (timeouts_.deadline.count() > 0 && now - started_ > timeouts_.deadline) {
      EndLocked(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                             absl::StrCat("the worker did not finish within ",
                                          std::chrono::duration<double>(timeouts_.deadline).count(),
                                          " s (--request-timeout-s)")));
    } else {
      EndLocked(WaitTimedOut(timeouts_, received_));
    }
  }
  CancelUpstream();
  std::unique_lock<std::mutex> lock(mutex_);
  Pump(lock);
}

void MultiplexedCall::EndLocked(grpc::Status status) {
  if (!end_) end_ = std::move(status);
}

void MultiplexedCall::CancelUpstream() {
  std::shared_ptr<WorkerStream> stream;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stream = stream_.lock();
  }
  if (stream != nullptr) stream->Cancel(request_id_);
}

void MultiplexedCall::Pump(std::unique_lock<std::mutex>& lock) {
  if (pumping_) return;  // the loop below, further up this thread's stack or another's, sees the change
  pumping_ = true;
  while (!done_) {
    if (!abandoned_ && waiting_ && !pending_.empty()) {
      // The lowest sample first; each message is one sample's merged tokens.
      ernie::v1::GenerateResponse message = std::move(pending_.begin()->second);
      pending_.erase(pending_.begin());
      waiting_ = false;
      auto on_message = handlers_.on_message;
      lock.unlock();
      if (on_message) on_message(*this, message);
      lock.lock();
      continue;
    }
    // The end: at once when the gateway gave up on the call (a cancel or a
    // timeout: what waits is dropped); otherwise, an error as much as a
    // normal end, once every message before it was taken and the consumer
    // asks again, as a gRPC stream delivers its status after its messages.
    if (end_ && (abandoned_ || (pending_.empty() && waiting_))) {
      done_ = true;
      Handlers handlers = std::move(handlers_);
      handlers_ = {};
      const grpc::Status status = *end_;
      std::shared_ptr<MultiplexedCall> keep_alive = std::move(self_);
      lock.unlock();
      if (handlers.on_done) handlers.on_done(status);
      lock.lock();
    }
    break;
  }
  pumping_ = false;
}

}  // namespace ernie::gateway
