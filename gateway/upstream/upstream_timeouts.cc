#include "gateway/upstream/upstream_timeouts.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ernie::gateway {
namespace {
constexpr auto kScanInterval = std::chrono::milliseconds(250);
}  // namespace

grpc::Status WaitTimedOut(const UpstreamTimeouts& timeouts, bool received) {
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                      absl::StrCat(received ? "no further token" : "no first token", " from the worker within ",
                                   std::chrono::duration<double>(timeouts.WaitLimit(received)).count(), " s (",
                                   received ? "--stall-timeout-s" : "--first-token-timeout-s", ")"));
}

UpstreamWatchdog& UpstreamWatchdog::Instance() {
  static UpstreamWatchdog* watchdog = new UpstreamWatchdog();  // never destroyed: calls may end during exit
  return *watchdog;
}

UpstreamWatchdog::~UpstreamWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void UpstreamWatchdog::Watch(std::weak_ptr<WatchedCall> call) {
  std::lock_guard<std::mutex> lock(mutex_);
  calls_.push_back(std::move(call));
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void UpstreamWatchdog::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, kScanInterval, [this] { return stopping_; });
    if (stopping_) return;
    std::erase_if(calls_, [](const std::weak_ptr<WatchedCall>& call) { return call.expired(); });
    std::vector<std::shared_ptr<WatchedCall>> overdue;
    const auto now = std::chrono::steady_clock::now();
    for (const auto& weak : calls_) {
      if (auto call = weak.lock(); call && call->Overdue(now)) overdue.push_back(std::move(call));
    }
    // TimeOut cancels a gRPC call, whose callbacks may run at once: not under our lock.
    lock.unlock();
    for (auto& call : overdue) call->TimeOut();
    overdue.clear();
    lock.lock();
  }
}

}  // namespace ernie::gateway
