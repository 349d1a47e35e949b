// Requests on shared Worker.GenerateMany streams (worker.proto): a worker
// sends one message a step carrying the new tokens of every request on the
// stream, instead of a gRPC message a token a request, which was the
// largest part of both the gateway's and the worker's CPU a token.
//
//   MultiplexedWorker  one worker's few GenerateMany streams (requests are
//                      spread over them so their tokens are handled on
//                      several gRPC threads); a stream that ended is
//                      reopened for the next request.
//   WorkerStream       one stream: writes starts and cancels, routes each
//                      update to its request's call.
//   MultiplexedCall    one request, an UpstreamCall: keeps what arrived
//                      until the consumer asks for it (a slow HTTP reader
//                      costs one merged message a sample, not a queue).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ernie/v1/worker.grpc.pb.h"
#include "gateway/upstream/upstream_call.h"
#include "gateway/upstream/upstream_timeouts.h"
#include "grpcpp/alarm.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"

namespace ernie::gateway {

class MultiplexedCall;

class WorkerStream : public grpc::ClientBidiReactor<ernie::v1::GenerateManyRequest, ernie::v1::GenerateManyResponse> {
 public:
  static std::shared_ptr<WorkerStream> Open(ernie::v1::Worker::Stub* stub);

  // Registers `call` under the request's id and sends the start; false
  // once the stream has ended (open another).
  bool Start(const ernie::v1::GenerateRequest& request, const std::shared_ptr<MultiplexedCall>& call);
  void Cancel(const std::string& request_id);  // the worker aborts it; its last update follows
  void Close();                                 // cancels the stream (every call on it ends)
  bool ended() const;

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  WorkerStream() = default;
  void MaybeWriteLocked();

  grpc::ClientContext context_;
  mutable std::mutex mutex_;  // guards everything below but read_
  absl::flat_hash_map<std::string, std::weak_ptr<MultiplexedCall>> calls_;  // open requests
  std::deque<ernie::v1::GenerateManyRequest> outbox_;
  ernie::v1::GenerateManyRequest in_flight_;  // the message being written
  bool writing_ = false;
  bool ended_ = false;
  ernie::v1::GenerateManyResponse read_;      // the message being read (one read at a time)
  std::shared_ptr<WorkerStream> self_;        // alive until OnDone
};

class MultiplexedWorker {
 public:
  MultiplexedWorker(ernie::v1::Worker::Stub* stub, int streams);
  ~MultiplexedWorker();  // closes the streams

  // The next stream in turn, reopened when it has ended.
  std::shared_ptr<WorkerStream> NextStream();

 private:
  ernie::v1::Worker::Stub* const stub_;  // owned by the endpoint, which owns this
  std::mutex mutex_;
  std::vector<std::shared_ptr<WorkerStream>> streams_;
  size_t next_ = 0;
};

class MultiplexedCall : public UpstreamCall, public WatchedCall {
 public:
  // The request needs a request_id (unique among the worker's running
  // requests). Watched for the timeouts like a GenerateCall.
  static std::shared_ptr<MultiplexedCall> Start(MultiplexedWorker& worker, const ernie::v1::GenerateRequest& request,
                                                Handlers handlers, const UpstreamTimeouts& timeouts = {});

  void ReadNext() override;
  void Cancel() override;

  // From its stream (a gRPC thread).
  void OnUpdate(const ernie::v1::GenerateUpdate& update);
  void OnStreamEnded(const grpc::Status& status);

  // WatchedCall (the watchdog's thread).
  bool Overdue(std::chrono::steady_clock::time_point now) override;
  void TimeOut() override;

 private:
  MultiplexedCall() = default;
  // Delivers what the consumer can take now: the next sample's message when
  // it waits for one, the end when nothing is left (at once when abandoned). One
  // delivery loop at a time; a call made from inside a handler only records
  // what it asked for.
  void Pump(std::unique_lock<std::mutex>& lock);
  void EndLocked(grpc::Status status);  // the first end wins
  void CancelUpstream();                // tells the stream, outside the lock

  std::string request_id_;
  UpstreamTimeouts timeouts_;
  std::weak_ptr<WorkerStream> stream_;
  std::mutex mutex_;  // guards everything below
  Handlers handlers_;
  std::map<int32_t, ernie::v1::GenerateResponse> pending_;  // by sample: what arrived and was not delivered
  bool waiting_ = true;   // the consumer asked for a message (the first is asked for at start)
  bool pumping_ = false;
  bool received_ = false;  // something arrived: the first-token limit is over
  bool abandoned_ = false;  // cancelled or timed out: the end goes at once, what waits is dropped
  bool done_ = false;      // on_done ran (or is running)
  std::optional<grpc::Status> end_;
  std::chrono::steady_clock::time_point started_, wait_started_;
  grpc::Alarm defer_;      // runs the end of a cancelled call on a gRPC thread, not inside Cancel
  std::shared_ptr<MultiplexedCall> self_;  // alive until on_done
};

}  // namespace ernie::gateway
