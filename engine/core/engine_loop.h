// Runs an EngineCore on its own thread: requests and aborts come in through
// a queue, outputs go out through each request's sink (on the engine thread).
// The engine thread owns all engine state; the methods here are the only
// ways in, and they are thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>

#include "absl/status/status.h"
#include "engine/core/engine_core.h"

namespace ernie {

class EngineLoop {
 public:
  explicit EngineLoop(std::unique_ptr<EngineCore> core);
  ~EngineLoop();  // stops the thread; live requests are aborted
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Validates on the engine thread and waits for the verdict, so the caller
  // gets the same errors EngineCore::AddRequest gives (outputs then flow to
  // the sink). Unavailable once stopping.
  absl::Status Submit(EngineRequest request);
  // Non-blocking: `done` is called on the engine thread with AddRequest's
  // verdict (for callers that must not block, such as gRPC reactors).
  void SubmitAsync(EngineRequest request, std::function<void(const absl::Status&)> done);
  // Asynchronous: the request ends within one step.
  void Abort(const std::string& request_id);

  // Latest snapshot (updated after every step).
  EngineLoad Load() const;
  const EngineCore& core() const { return *core_; }

 private:
  struct AddCommand {
    EngineRequest request;
    std::function<void(const absl::Status&)> done;
  };
  struct AbortCommand {
    std::string request_id;
  };
  using Command = std::variant<AddCommand, AbortCommand>;

  void Run();
  void Publish();

  std::unique_ptr<EngineCore> core_;  // touched only by thread_ (and construction)
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Command> inbox_;         // guarded by mu_
  bool stopping_ = false;             // guarded by mu_
  EngineLoad load_;                   // guarded by mu_
  std::thread thread_;
};

}  // namespace ernie
