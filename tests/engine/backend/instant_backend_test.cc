// The instant (measurement) backend: its logits are the fixed function its
// header promises, a step floor makes every Forward last at least that long,
// so serving benchmarks see a real step's pace, and its launches overlap the
// host as a GPU's do.
#include "engine/backend/instant/instant_backend.h"

#include <chrono>
#include <vector>

#include "gtest/gtest.h"

namespace ernie {
namespace {

struct OneDecode {
  std::vector<int32_t> tokens{7};
  std::vector<int32_t> positions{4};
  std::vector<int32_t> blocks{0, 1};
  std::vector<SequenceSlice> slices{{.first_token = 0, .num_new_tokens = 1, .num_cached_tokens = 4, .block_table = blocks}};
  std::vector<int32_t> logit_rows{0};
  StepBatch batch() const { return {tokens, positions, slices, logit_rows}; }
};

TEST(InstantBackendTest, FavoursTheTokenItsContextNames) {
  auto backend = InstantBackend::Create({.vocab_size = 64, .block_size = 4, .num_blocks = 8});
  ASSERT_TRUE(backend.ok()) << backend.status();
  OneDecode step;
  std::vector<float> logits(64, -1.0f);
  ASSERT_TRUE((*backend)->Forward(step.batch(), logits).ok());
  const int favoured = 3 + (7 * 31 + 4) % (64 - 3);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(logits[i], i == favoured ? 8.0f : 0.0f) << i;
}

TEST(InstantBackendTest, StepFloorSetsTheStepsPace) {
  using std::chrono::steady_clock;
  constexpr auto kFloor = std::chrono::milliseconds(30);
  auto paced = InstantBackend::Create({.vocab_size = 64, .block_size = 4, .num_blocks = 8, .step_floor = kFloor});
  ASSERT_TRUE(paced.ok()) << paced.status();
  OneDecode step;
  std::vector<float> logits(64);
  for (int i = 0; i < 3; ++i) {
    const auto start = steady_clock::now();
    ASSERT_TRUE((*paced)->Forward(step.batch(), logits).ok());
    EXPECT_GE(steady_clock::now() - start, kFloor) << "step " << i;
  }
}

// The pace grows with the step's tokens and logit rows: 40 prompt tokens at
// 1 ms each cannot finish in under 40 ms, one decode in well under that.
TEST(InstantBackendTest, StepCostGrowsWithTokensAndRows) {
  using std::chrono::steady_clock;
  auto paced = InstantBackend::Create({.vocab_size = 64, .block_size = 4, .num_blocks = 16,
                                       .token_cost = std::chrono::milliseconds(1),
                                       .logit_row_cost = std::chrono::milliseconds(5)});
  ASSERT_TRUE(paced.ok()) << paced.status();
  std::vector<int32_t> tokens(40, 9), positions(40), blocks(10);
  for (int i = 0; i < 40; ++i) positions[i] = i;
  for (int i = 0; i < 10; ++i) blocks[i] = i;
  std::vector<SequenceSlice> slices{{.first_token = 0, .num_new_tokens = 40, .block_table = blocks}};
  std::vector<int32_t> rows{39};
  std::vector<float> logits(64);
  auto start = steady_clock::now();
  ASSERT_TRUE((*paced)->Forward({tokens, positions, slices, rows}, logits).ok());
  EXPECT_GE(steady_clock::now() - start, std::chrono::milliseconds(45));
  OneDecode step;
  start = steady_clock::now();
  ASSERT_TRUE((*paced)->Forward(step.batch(), logits).ok());
  EXPECT_GE(steady_clock::now() - start, std::chrono::milliseconds(6));
}

TEST(InstantBackendTest, RejectsANegativePaceAndABadBatch) {
  for (const InstantBackendOptions& o : {InstantBackendOptions{.step_floor = std::chrono::microseconds(-1)},
                                         InstantBackendOptions{.token_cost = std::chrono::nanoseconds(-1)},
                                         InstantBackendOptions{.logit_row_cost = std::chrono::nanoseconds(-1)}}) {
    auto bad = InstantBackend::Create(o);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(std::string(bad.status().message()).find("must be >= 0"), std::string::npos);
  }
  auto backend = InstantBackend::Create({.vocab_size = 64, .block_size = 4, .num_blocks = 8});
  ASSERT_TRUE(backend.ok());
  OneDecode step;
  step.blocks = {0, 99};  // past the pool's 8 blocks
  step.slices[0].block_table = step.blocks;
  std::vector<float> logits(64);
  EXPECT_FALSE((*backend)->Forward(step.batch(), logits).ok());
}

// Its device sampling: launches return at once and queue like a GPU's
// stream (the second step's pace starts when the first's ends); a fed-back
// token is the previous launch's sample; ForwardAndSample gives the same.
TEST(InstantBackendTest, LaunchesQueueLikeADeviceAndFeedBackTheirTokens) {
  using std::chrono::steady_clock;
  constexpr auto kFloor = std::chrono::milliseconds(100);  // far above a loaded CI machine's hiccups
  auto backend = InstantBackend::Create({.vocab_size = 64, .block_size = 4, .num_blocks = 8, .step_floor = kFloor});
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->OverlapsSteps());
  const SamplingParams greedy{.temperature = 0.0f};
  const DeviceSampleRow row{.logit_row = 0, .params = &greedy};
  OneDecode first;
  OneDecode second;
  second.tokens = {0};  // a placeholder: the first step's token comes back
  second.positions = {5};
  second.slices[0].num_cached_tokens = 5;
  const FedBackToken fed[] = {{.token_index = 0, .sample_row = 0}};
  StepBatch fed_batch = second.batch();
  fed_batch.fed_back_tokens = fed;
  // No launch yet: nothing to feed back or to wait for.
  EXPECT_EQ((*backend)->LaunchForwardAndSample(fed_batch, {.rows = {&row, 1}}).code(),
            absl::StatusCode::kInvalidArgument);
  SampledToken out;
  EXPECT_EQ((*backend)->WaitForSamples({&out, 1}).code(), absl::StatusCode::kFailedPrecondition);

  const auto start = steady_clock::now();
  ASSERT_TRUE((*backend)->LaunchForwardAndSample(first.batch(), {.rows = {&row, 1}}).ok());
  ASSERT_TRUE((*backend)->LaunchForwardAndSample(fed_batch, {.rows = {&row, 1}}).ok());
  EXPECT_LT(steady_clock::now() - start, kFloor) << "a launch waits for nothing";
  SampledToken a, b;
  ASSERT_TRUE((*backend)->WaitForSamples({&a, 1}).ok());
  EXPECT_GE(steady_clock::now() - start, kFloor);
  ASSERT_TRUE((*backend)->WaitForSamples({&b, 1}).ok());
  EXPECT_GE(steady_clock::now() - start, 2 * kFloor) << "the second step runs after the first";
  const int want_a = 3 + (7 * 31 + 4) % (64 - 3);
  EXPECT_EQ(a.token_id, want_a);
  EXPECT_EQ(b.token_id, 3 + (want_a * 31 + 5) % (64 - 3));
  // One step at a time, with the token written in: the same.
  second.tokens = {want_a};
  SampledToken again;
  ASSERT_TRUE((*backend)->ForwardAndSample(second.batch(), {.rows = {&row, 1}}, {&again, 1}).ok());
  EXPECT_EQ(again.token_id, b.token_id);
  EXPECT_EQ((*backend)->ForwardAndSample(fed_batch, {.rows = {&row, 1}}, {&again, 1}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ernie
