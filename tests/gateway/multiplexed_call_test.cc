// MultiplexedCall against the fake worker's GenerateMany, over real gRPC:
// what arrives while the consumer is busy waits merged into one message a
// sample; the end comes after the messages, and only when asked for; a
// cancel ends the call with its on_done outside Cancel (the job cancels
// under the lock its on_done takes), reaches the worker, and leaves nothing
// holding the call once it is delivered; a worker that sends nothing is
// timed out.
#include "gateway/upstream/multiplexed_call.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tests/gateway/fake_services.h"

namespace ernie::gateway {
namespace {

using testing::FakeServer;
using testing::FakeWorker;

// What the handlers saw, for the test thread to wait on.
struct Consumer {
  std::mutex mu;
  std::condition_variable changed;
  std::vector<ernie::v1::GenerateResponse> messages;
  std::optional<grpc::Status> done;
  std::shared_ptr<UpstreamCall> call;

  UpstreamCall::Handlers Handlers() {
    return {.on_message =
                [this](UpstreamCall&, const ernie::v1::GenerateResponse& message) {
                  std::lock_guard<std::mutex> lock(mu);
                  messages.push_back(message);
                  changed.notify_all();
                },
            .on_done =
                [this](const grpc::Status& status) {
                  std::lock_guard<std::mutex> lock(mu);
                  done = status;
                  changed.notify_all();
                }};
  }
  template <typename Predicate>
  bool WaitFor(Predicate ready) {
    std::unique_lock<std::mutex> lock(mu);
    return changed.wait_for(lock, std::chrono::seconds(10), [&] { return ready(); });
  }
};

struct Rig {
  FakeWorker worker;
  FakeServer server{&worker};
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  std::unique_ptr<ernie::v1::Worker::Stub> stub = ernie::v1::Worker::NewStub(channel);
  MultiplexedWorker streams{stub.get(), 2};
};

// Starts a call after what the test set on the fake (grpc_handoff.h: the
// fake's handler takes over from here).
std::shared_ptr<MultiplexedCall> Start(Rig& rig, const std::string& id, UpstreamCall::Handlers handlers,
                                       const UpstreamTimeouts& timeouts = {});

ernie::v1::GenerateRequest Request(const std::string& id) {
  ernie::v1::GenerateRequest request;
  request.set_request_id(id);
  request.add_prompt_token_ids(7);
  return request;
}

std::shared_ptr<MultiplexedCall> Start(Rig& rig, const std::string& id, UpstreamCall::Handlers handlers,
                                       const UpstreamTimeouts& timeouts) {
  HandToGrpc(&testing::kFakeServicesOrder);
  return MultiplexedCall::Start(rig.streams, Request(id), std::move(handlers), timeouts);
}

std::vector<int32_t> Tokens(const ernie::v1::GenerateResponse& message) {
  return {message.token_ids().begin(), message.token_ids().end()};
}

TEST(MultiplexedCallTest, WhatArrivesWhileTheConsumerIsBusyWaitsMerged) {
  Rig rig;
  rig.worker.chunks = {{3}, {4}, {5}};
  Consumer consumer;
  consumer.call = Start(rig, "merge", consumer.Handlers());
  // The first message goes at once (a call starts asking); the consumer does
  // not ask again, so the rest and the end wait.
  ASSERT_TRUE(consumer.WaitFor([&] { return consumer.messages.size() == 1; }));
  // Three tokens' updates and the closing one written, then time for loopback to bring them.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rig.worker.updates_sent < 4 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(rig.worker.updates_sent, 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  {
    std::lock_guard<std::mutex> lock(consumer.mu);
    EXPECT_EQ(consumer.messages.size(), 1u);
    EXPECT_FALSE(consumer.done.has_value()) << "the end came before the messages were taken";
  }
  consumer.call->ReadNext();
  ASSERT_TRUE(consumer.WaitFor([&] { return consumer.messages.size() == 2; }));
  {
    std::lock_guard<std::mutex> lock(consumer.mu);
    EXPECT_EQ(Tokens(consumer.messages[0]), std::vector<int32_t>{3});
    EXPECT_EQ(Tokens(consumer.messages[1]), (std::vector<int32_t>{4, 5}));
    EXPECT_EQ(consumer.messages[1].completion_tokens(), 3);
    EXPECT_EQ(consumer.messages[1].finish_reason(), ernie::v1::FINISH_REASON_STOP);
    EXPECT_FALSE(consumer.done.has_value());
  }
  consumer.call->ReadNext();
  ASSERT_TRUE(consumer.WaitFor([&] { return consumer.done.has_value(); }));
  EXPECT_TRUE(consumer.done->ok()) << consumer.done->error_message();
}

TEST(MultiplexedCallTest, AnErrorComesAfterTheMessagesBeforeIt) {
  Rig rig;
  rig.worker.chunks = {{3}, {4}};
  rig.worker.end_with = grpc::Status(grpc::StatusCode::INTERNAL, "engine step failed");
  Consumer consumer;
  consumer.call = Start(rig, "error", consumer.Handlers());
  ASSERT_TRUE(consumer.WaitFor([&] { return consumer.messages.size() == 1; }));
  consumer.call->ReadNext();
  ASSERT_TRUE(consumer.WaitFor([&] { return consumer.messages.size() == 2; }));
  consumer.call->ReadNext();
  ASSERT_TRUE(consumer.WaitFor([&] { return consumer.done.has_value(); }));
  EXPECT_EQ(consumer.done->error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(consumer.done->error_message(), "engine step failed");
}

// The job cancels under the mutex its on_done takes: on_done must not run
// inside Cancel on the cancelling thread.
TEST(MultiplexedCallTest, CancelEndsTheCallOutsideCancelAndReachesTheWorker) {
  Rig rig;
  rig.worker.chunks = {{3}};
  rig.worker.hang = true;
  std::mutex job_lock;
  std::atomic<bool> done_inside_cancel{false};
  std::atomic<std::thread::id> cancelling{};
  Consumer consumer;
  UpstreamCall::Handlers handlers = consumer.Handlers();
  auto record_done = handlers.on_done;
  handlers.on_done = [&, record_done](const grpc::Status& status) {
    if (std::this_thread::get_id() == cancelling.load()) done_inside_cancel = true;
    std::lock_guard<std::mutex> lock(job_lock);  // would deadlock if it ran inside Cancel below
    record_done(status);
  };
  consumer.call = Start(rig, "cancel", handlers);
  ASSERT_TRUE(consumer.WaitFor([&] { return consumer.messages.size() == 1; }));
  {
    std::lock_guard<std::mutex> lock(job_lock);
    cancelling = std::this_thread::get_id();
    consumer.call->Cancel();
    cancelling = std::thread::id();
  }
  ASSERT_TRUE(consumer.WaitFor([&] { return consumer.done.has_value(); }));
  EXPECT_FALSE(done_inside_cancel);
  EXPECT_EQ(consumer.done->error_code(), grpc::StatusCode::CANCELLED);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!rig.worker.saw_cancel && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(rig.worker.saw_cancel);
}

// Every finished group cancels its call (a stop string may end it while
// the worker still generates), so a cancelled call must be freed once its
// end is delivered and its consumer lets go. It was not: the alarm that
// delivers the end held the call, and gRPC keeps an alarm's callback until
// the alarm, a member of the call, is destroyed (the soak's gateway grew 40%
// in 25 minutes, README "Soak").
TEST(MultiplexedCallTest, ACancelledCallIsFreedOnceItsEndIsDelivered) {
  Rig rig;
  rig.worker.chunks = {{3}};
  rig.worker.hang = true;
  Consumer consumer;
  consumer.call = Start(rig, "freed", consumer.Handlers());
  ASSERT_TRUE(consumer.WaitFor([&] { return consumer.messages.size() == 1; }));
  consumer.call->Cancel();
  ASSERT_TRUE(consumer.WaitFor([&] { return consumer.done.has_value(); }));
  const std::weak_ptr<UpstreamCall> weak = consumer.call;
  consumer.call.reset();
  // The alarm's thread may still hold it for the moment it takes to return.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!weak.expired() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(weak.expired()) << "the cancelled call outlived its consumer";
}

TEST(MultiplexedCallTest, AWorkerThatSendsNothingTimesOut) {
  Rig rig;
  rig.worker.chunks = {};
  rig.worker.hang = true;
  Consumer consumer;
  consumer.call = Start(rig, "silent", consumer.Handlers(), {.first_token = std::chrono::milliseconds(300)});
  ASSERT_TRUE(consumer.WaitFor([&] { return consumer.done.has_value(); }));
  EXPECT_EQ(consumer.done->error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(consumer.done->error_message().find("no first token"), std::string::npos) << consumer.done->error_message();
  EXPECT_TRUE(consumer.messages.empty());
}

// Many requests over the two streams at once: each gets its own tokens.
TEST(MultiplexedCallTest, ConcurrentRequestsEachGetTheirOwn) {
  Rig rig;
  rig.worker.chunks = {{3, 4}, {5}};
  constexpr int kCalls = 40;
  std::vector<Consumer> consumers(kCalls);
  std::vector<std::shared_ptr<UpstreamCall>> calls;
  for (int i = 0; i < kCalls; ++i) {
    auto handlers = consumers[i].Handlers();
    auto record = handlers.on_message;
    handlers.on_message = [record](UpstreamCall& call, const ernie::v1::GenerateResponse& message) {
      record(call, message);
      call.ReadNext();
    };
    consumers[i].call = Start(rig, absl::StrCat("c", i), handlers);
  }
  for (int i = 0; i < kCalls; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(consumers[i].WaitFor([&] { return consumers[i].done.has_value(); }));
    EXPECT_TRUE(consumers[i].done->ok());
    std::vector<int32_t> tokens;
    for (const auto& message : consumers[i].messages) {
      const auto part = Tokens(message);
      tokens.insert(tokens.end(), part.begin(), part.end());
    }
    EXPECT_EQ(tokens, (std::vector<int32_t>{3, 4, 5}));
  }
}

}  // namespace
}  // namespace ernie::gateway
