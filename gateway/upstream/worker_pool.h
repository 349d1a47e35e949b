// The workers behind the gateway: their gRPC stubs, health and load (polled
// with GetLoad every ~200 ms), their ModelInfo, and the routing of each new
// request (least load, prefix-cache affinity, failed workers skipped).
// A DNS name (a Kubernetes headless Service) is re-resolved periodically and
// the set of workers follows it. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ernie/v1/worker.grpc.pb.h"
#include "grpcpp/security/credentials.h"
#include "gateway/upstream/multiplexed_call.h"
#include "gateway/upstream/prefix_affinity_table.h"
#include "gateway/upstream/worker_choice.h"

namespace ernie::gateway {

struct WorkerPoolOptions {
  std::vector<std::string> addresses;  // host:port, each one worker
  std::string dns_name;                // host:port resolving to many workers ("" = none)
  std::chrono::milliseconds poll_interval{200};
  std::chrono::milliseconds poll_timeout{1000};
  std::chrono::milliseconds dns_interval{5000};
  WorkerChoiceOptions choice;
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // null: plaintext
  std::string tls_server_name;  // TLS: the name the workers' certificates carry ("" : the address's host)
  // Requests go to each worker over this many shared Worker.GenerateMany
  // streams (one message a step for all their tokens); 0: a Worker.Generate
  // stream per request (one message a token; for workers without GenerateMany).
  int multiplexed_streams = 4;
};

// One worker; the stub is shared with in-flight calls, so it outlives a
// worker's removal from the pool.
struct WorkerEndpoint {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<ernie::v1::Worker::Stub> stub;
  std::unique_ptr<MultiplexedWorker> multiplexed;  // its GenerateMany streams; null: a Generate call per request
};

struct WorkerStatus {
  std::string address;
  bool healthy = false;
  ernie::v1::Load load;
  int in_flight = 0;
};

class WorkerPool {
 public:
  explicit WorkerPool(WorkerPoolOptions options);
  ~WorkerPool();  // Stop()s

  void Start();  // the polling thread
  void Stop();
  // Waits until every lease has been released; false on timeout. A
  // generation's last gRPC callback, which releases its lease, can come
  // after its client has the whole answer: whoever destroys the pool while
  // the process goes on (tests; ernie-gateway _Exit()s instead) waits here
  // first, after stopping the HTTP server so that no new lease is taken.
  bool WaitForLeasesReleased(std::chrono::milliseconds timeout);

  // A worker chosen for a request, its in-flight count raised until Release.
  struct Lease {
    std::shared_ptr<WorkerEndpoint> endpoint;
  };
  // Nullopt when no healthy worker is left outside `excluded` (addresses).
  std::optional<Lease> Acquire(uint64_t affinity_key, const std::vector<std::string>& excluded);
  // Every lease is released exactly once. `failed`: the worker did not
  // answer (UNAVAILABLE); it is taken out until a poll succeeds again.
  // `served_prefix` records the affinity.
  void Release(const Lease& lease, bool failed, std::optional<uint64_t> served_prefix);

  bool AnyHealthy() const;
  // The first known ModelInfo (every worker serves the same model).
  std::optional<ernie::v1::ModelInfo> model_info() const;
  std::vector<WorkerStatus> Statuses() const;

  // Blocks until a poll round has completed for every worker (tests, start-up).
  void PollNowForTest();

 private:
  struct Worker {
    uint32_t id = 0;  // never reused: an address that DNS drops and brings back is a new worker
    std::shared_ptr<WorkerEndpoint> endpoint;
    bool healthy = false;
    bool poll_pending = false;
    bool info_pending = false;
    ernie::v1::Load load;
    int in_flight = 0;
    std::optional<ernie::v1::ModelInfo> info;
  };

  void PollLoop();
  void PollAll();
  void Poll(const std::shared_ptr<Worker>& worker);
  void OnLoadPolled(Worker& worker, const grpc::Status& status, const ernie::v1::Load& load);
  void OnInfoFetched(Worker& worker, const grpc::Status& status, const ernie::v1::ModelInfo& info);
  void ResolveDns();
  std::shared_ptr<Worker> AddWorkerLocked(const std::string& address);

  WorkerPoolOptions options_;
  mutable std::mutex mutex_;                     // guards everything below
  std::vector<std::shared_ptr<Worker>> workers_;  // in address order of arrival
  PrefixAffinityTable affinity_;                 // prefix key -> id of the last worker to serve it
  uint32_t next_worker_id_ = 0;                  // Worker::id of the next worker added
  std::optional<ernie::v1::ModelInfo> model_info_;
  std::condition_variable wake_;                 // Stop() and PollNowForTest
  std::condition_variable polled_;               // a poll answer arrived, or a lease came back
  bool stopping_ = false;
  int outstanding_polls_ = 0;                    // GetLoad / GetModelInfo calls not yet answered
  int leases_out_ = 0;                           // Acquire()d and not yet Release()d
  std::chrono::steady_clock::time_point next_dns_;
  std::thread poller_;
};

}  // namespace ernie::gateway
