#include "tools/bench/engine_streams.h"

#include <gtest/gtest.h>

#include "engine/backend/instant/instant_backend.h"

namespace ernie::bench {
namespace {

std::unique_ptr<InstantBackend> Backend() {
  auto backend = InstantBackend::Create({.vocab_size = 1000, .block_size = 16, .num_blocks = 8 * 12,
                                         .max_tokens_per_step = 2048, .step_floor = std::chrono::microseconds(50)});
  EXPECT_TRUE(backend.ok()) << backend.status();
  return std::move(*backend);
}

TEST(EngineStreamsTest, EveryStreamGetsAllItsTokens) {
  auto backend = Backend();
  for (const bool overlap : {false, true}) {
    auto r = RunEngineStreams(*backend, 8, 16, 24, overlap);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->output_tokens, 8 * 24);
    EXPECT_EQ(r->overlapped, overlap);
  }
}

// Steady arrivals: a request added between two steps has its first token
// from the next Step() one step at a time, and a step later overlapped
// (the step after it was planned before the request came).
TEST(EngineStreamsTest, AsyncSchedulingCostsExactlyOneStepToFirstToken) {
  auto backend = Backend();
  auto plain = RunSteadyArrivals(*backend, 8, 3, 16, 32, /*overlap=*/false);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->requests, 16);
  EXPECT_FALSE(plain->overlapped);
  EXPECT_EQ(plain->ttft_steps_p50, 0);
  EXPECT_EQ(plain->ttft_steps_p90, 0);
  auto async = RunSteadyArrivals(*backend, 8, 3, 16, 32, /*overlap=*/true);
  ASSERT_TRUE(async.ok()) << async.status();
  EXPECT_TRUE(async->overlapped);
  EXPECT_EQ(async->ttft_steps_p50, 1);
  EXPECT_EQ(async->ttft_steps_p90, 1);
}

TEST(EngineStreamsTest, SteadyArrivalsRejectTooShortRuns) {
  auto backend = Backend();
  EXPECT_FALSE(RunSteadyArrivals(*backend, 8, 1, 16, 32, false).ok());
  EXPECT_FALSE(RunSteadyArrivals(*backend, 8, 3, 16, 8, false).ok());
}

}  // namespace
}  // namespace ernie::bench
