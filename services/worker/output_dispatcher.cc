#include "services/worker/output_dispatcher.h"

#include <utility>

namespace ernie::worker {

OutputDispatcher& OutputDispatcher::Shared() {
  static auto* dispatcher = new OutputDispatcher();  // intentionally leaked: see the header
  return *dispatcher;
}

OutputDispatcher::OutputDispatcher() : thread_([this] { Run(); }) { thread_.detach(); }

void OutputDispatcher::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  ready_.notify_one();
}

void OutputDispatcher::PostAhead(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ahead_.push_back(std::move(task));
  }
  ready_.notify_one();
}

void OutputDispatcher::PostOutput(const SampleOutput& out, std::function<void()> task) {
  const bool first = out.completion_tokens == static_cast<int32_t>(out.token_ids.size());
  if (first) {
    PostAhead(std::move(task));
  } else {
    Post(std::move(task));
  }
}

void OutputDispatcher::PostAfterBatch(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    after_.push_back(std::move(task));
  }
  ready_.notify_one();
}

void OutputDispatcher::Run() {
  std::vector<std::function<void()>> ahead, batch, after;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [this] { return !queue_.empty() || !ahead_.empty() || !after_.empty(); });
      ahead.swap(ahead_);
      batch.swap(queue_);  // a whole engine step's outputs at once
    }
    for (auto& task : ahead) task();
    ahead.clear();
    for (auto& task : batch) task();
    batch.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      after.swap(after_);
    }
    for (auto& task : after) task();
    after.clear();
  }
}

}  // namespace ernie::worker
