// The worker's output dispatcher: tasks run one at a time in post order,
// tasks posted ahead (samples' first tokens) overtake those still waiting,
// in their own post order, and after-batch tasks (a stream's flush) run when
// the batch they were posted in is over.
#include "services/worker/output_dispatcher.h"

#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ernie::worker {
namespace {

class Recorder {
 public:
  std::function<void()> Task(std::string name) {
    return [this, name] {
      std::lock_guard<std::mutex> lock(mu_);
      order_.push_back(name);
    };
  }
  std::vector<std::string> order() {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> order_;
};

// Holds the dispatcher's thread inside a task until released, so that the
// tasks posted meanwhile wait in its queues together.
struct Gate {
  std::promise<void> entered, release;
  std::shared_future<void> released{release.get_future().share()};
  void Hold(OutputDispatcher& d) {
    d.Post([this] {
      entered.set_value();
      released.wait();
    });
    entered.get_future().wait();
  }
};

void Drain(OutputDispatcher& d) {
  std::promise<void> done;
  d.Post([&done] { done.set_value(); });
  ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

TEST(OutputDispatcherTest, RunsTasksInPostOrder) {
  OutputDispatcher& d = OutputDispatcher::Shared();
  Recorder r;
  for (int i = 0; i < 100; ++i) d.Post(r.Task(std::to_string(i)));
  Drain(d);
  const std::vector<std::string> order = r.order();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], std::to_string(i));
}

TEST(OutputDispatcherTest, FirstOutputsGoAheadOfWaitingTasks) {
  OutputDispatcher& d = OutputDispatcher::Shared();
  Recorder r;
  Gate gate;
  gate.Hold(d);
  d.Post(r.Task("running-1"));
  d.Post(r.Task("running-2"));
  d.PostAhead(r.Task("first-a"));
  d.Post(r.Task("running-3"));
  d.PostAhead(r.Task("first-b"));
  gate.release.set_value();
  Drain(d);
  EXPECT_EQ(r.order(), (std::vector<std::string>{"first-a", "first-b", "running-1", "running-2", "running-3"}));
}

TEST(OutputDispatcherTest, AfterBatchTasksRunOnceTheBatchIsOver) {
  OutputDispatcher& d = OutputDispatcher::Shared();
  Recorder r;
  Gate gate;
  gate.Hold(d);
  d.Post([&] {
    r.Task("output-1")();
    d.PostAfterBatch(r.Task("flush"));  // posted from inside the batch, as a stream's first delivery does
  });
  d.Post(r.Task("output-2"));
  d.PostAhead(r.Task("first"));
  gate.release.set_value();
  // The first drain's task can share the outputs' batch; the second runs in
  // a later batch, so after that batch's after-batch tasks.
  Drain(d);
  Drain(d);
  EXPECT_EQ(r.order(), (std::vector<std::string>{"first", "output-1", "output-2", "flush"}));
}

}  // namespace
}  // namespace ernie::worker
