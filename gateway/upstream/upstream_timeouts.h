// Time limits on Worker.Generate calls, so a worker that hangs (stopped,
// deadlocked, partitioned) gives the client a 504 instead of a stuck
// connection. Only the time the gateway spends *waiting for the worker*
// counts: while a slow HTTP reader holds a stream back (no read
// outstanding), the stall clock does not run.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#include <condition_variable>

#include "grpcpp/support/status.h"

namespace ernie::gateway {

struct UpstreamTimeouts {
  std::chrono::milliseconds first_token{300'000};  // no first message within this: 504 (0: off)
  std::chrono::milliseconds stall{120'000};        // no next message within this while reading: 504 (0: off)
  std::chrono::milliseconds deadline{0};           // the whole call (gRPC deadline; 0: none)

  // How long a call may wait for its next message (0: for ever): the
  // first-token limit until something arrived, the stall limit after.
  std::chrono::milliseconds WaitLimit(bool received) const { return received ? stall : first_token; }
};

// The status of a call the watchdog ended for waiting past WaitLimit(received).
grpc::Status WaitTimedOut(const UpstreamTimeouts& timeouts, bool received);

// Something the watchdog looks at: Overdue() says whether its time is up
// (cheap, thread-safe); TimeOut() ends it.
class WatchedCall {
 public:
  virtual ~WatchedCall() = default;
  virtual bool Overdue(std::chrono::steady_clock::time_point now) = 0;
  virtual void TimeOut() = 0;
};

// One thread for the whole process that checks every watched call four
// times a second. Calls are held weakly: a finished call just drops out.
class UpstreamWatchdog {
 public:
  static UpstreamWatchdog& Instance();
  ~UpstreamWatchdog();

  void Watch(std::weak_ptr<WatchedCall> call);

 private:
  UpstreamWatchdog() = default;
  void Loop();

  std::mutex mutex_;  // guards calls_, stopping_, thread_
  std::condition_variable wake_;
  std::vector<std::weak_ptr<WatchedCall>> calls_;
  bool stopping_ = false;
  std::thread thread_;  // started by the first Watch
};

}  // namespace ernie::gateway
