#include "engine/core/engine_loop.h"

namespace ernie {

EngineLoop::EngineLoop(std::unique_ptr<EngineCore> core) : core_(std::move(core)) {
  load_ = core_->Load();
  thread_ = std::thread([this] { Run(); });
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

absl::Status EngineLoop::Submit(EngineRequest request) {
  auto verdict = std::make_shared<std::promise<absl::Status>>();
  auto result = verdict->get_future();
  SubmitAsync(std::move(request), [verdict](const absl::Status& s) { verdict->set_value(s); });
  return result.get();
}

void EngineLoop::SubmitAsync(EngineRequest request, std::function<void(const absl::Status&)> done) {
  // The engine thread takes it after the step in progress: that wait is queue time too.
  if (!request.arrival_time) request.arrival_time = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      inbox_.push_back(AddCommand{std::move(request), std::move(done)});
      wake_.notify_one();
      return;
    }
  }
  done(absl::UnavailableError("the engine is stopping"));
}

void EngineLoop::Abort(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.push_back(AbortCommand{request_id});
  }
  wake_.notify_one();
}

EngineLoad EngineLoop::Load() const {
  std::lock_guard<std::mutex> lock(mu_);
  return load_;
}

void EngineLoop::Publish() {
  EngineLoad load = core_->Load();
  std::lock_guard<std::mutex> lock(mu_);
  load_ = load;
}

void EngineLoop::Run() {
  std::deque<Command> commands;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || !inbox_.empty() || core_->HasWork(); });
      if (stopping_) break;
      commands.swap(inbox_);
    }
    for (Command& c : commands) {
      if (auto* add = std::get_if<AddCommand>(&c)) {
        add->done(core_->AddRequest(std::move(add->request)));
      } else {
        core_->Abort(std::get<AbortCommand>(c).request_id);
      }
    }
    commands.clear();
    core_->Step();
    Publish();
  }
  // Stopping: refuse what is queued, abort what runs (sinks hear "abort").
  std::deque<Command> rest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rest.swap(inbox_);
  }
  for (Command& c : rest)
    if (auto* add = std::get_if<AddCommand>(&c)) add->done(absl::UnavailableError("the engine is stopping"));
  core_->AbortAll();
}

}  // namespace ernie
