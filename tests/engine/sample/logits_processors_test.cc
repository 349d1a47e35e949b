#include "engine/sample/logits_processors.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace ernie {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Logits 0..6 chosen with both signs so the repetition penalty's two branches show.
std::vector<float> SevenLogits() { return {2.0f, -1.0f, 0.5f, -3.0f, 4.0f, 0.0f, 1.0f}; }

OutputTokenCounts CountsOf(std::initializer_list<int32_t> tokens) {
  OutputTokenCounts counts;
  for (int32_t token : tokens) counts.Add(token);
  return counts;
}

TEST(TokenCountsTest, PromptSetIsDistinctAndSorted) {
  const std::vector<int32_t> prompt = {5, 1, 5, 3, 1, 1};
  const PromptTokenSet set(prompt);
  EXPECT_EQ(std::vector<int32_t>(set.distinct_ids().begin(), set.distinct_ids().end()), (std::vector<int32_t>{1, 3, 5}));
  EXPECT_TRUE(set.Contains(3));
  EXPECT_FALSE(set.Contains(2));
}

TEST(TokenCountsTest, OutputCountsGrowOneTokenAtATime) {
  const OutputTokenCounts counts = CountsOf({4, 4, 6});
  EXPECT_EQ(counts.num_tokens(), 3);
  EXPECT_EQ(counts.CountOf(4), 2);
  EXPECT_EQ(counts.CountOf(6), 1);
  EXPECT_EQ(counts.CountOf(0), 0);
  EXPECT_EQ(counts.counts().size(), 2u);
}

TEST(TokenCountsTest, ManyCopiesAtOnceCountAsOneAtATime) {
  OutputTokenCounts counts = CountsOf({4});
  counts.Add(4, 3);
  counts.Add(7, 0);  // nothing, and no entry
  counts.Add(7, -2);
  EXPECT_EQ(counts.num_tokens(), 4);
  EXPECT_EQ(counts.CountOf(4), 4);
  EXPECT_EQ(counts.counts().size(), 1u);
}

TEST(LogitsProcessorsTest, LogitBiasAddsToExactlyItsTokens) {
  std::vector<float> logits = SevenLogits();
  ApplyLogitBias({{1, 5.0f}, {4, -100.0f}}, logits);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, 4.0f, 0.5f, -3.0f, -96.0f, 0.0f, 1.0f}));
}

TEST(LogitsProcessorsTest, RepetitionPenaltyDividesPositiveAndMultipliesNegativeOverPromptAndOutput) {
  std::vector<float> logits = SevenLogits();
  const std::vector<int32_t> prompt_ids = {0, 1, 1};
  const PromptTokenSet prompt(prompt_ids);
  // Token 0 is in both prompt and output: penalized once, not twice.
  ApplyRepetitionPenalty(2.0f, &prompt, CountsOf({0, 3, 3, 5}), logits);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.0f, 0.5f, -6.0f, 4.0f, 0.0f, 1.0f}));
}

TEST(LogitsProcessorsTest, RepetitionPenaltyWithoutPromptUsesOutputOnly) {
  std::vector<float> logits = SevenLogits();
  ApplyRepetitionPenalty(0.5f, nullptr, CountsOf({4}), logits);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, -1.0f, 0.5f, -3.0f, 8.0f, 0.0f, 1.0f}));
}

TEST(LogitsProcessorsTest, FrequencyAndPresenceCountOutputTokensOnly) {
  std::vector<float> logits = SevenLogits();
  // 2 appears three times, 6 once; the prompt plays no part.
  ApplyFrequencyAndPresencePenalties(0.5f, 0.25f, CountsOf({2, 6, 2, 2}), logits);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, -1.0f, 0.5f - 1.5f - 0.25f, -3.0f, 4.0f, 0.0f, 1.0f - 0.5f - 0.25f}));
}

TEST(LogitsProcessorsTest, NegativePenaltiesEncourageRepetition) {
  std::vector<float> logits = SevenLogits();
  ApplyFrequencyAndPresencePenalties(-1.0f, -2.0f, CountsOf({3, 3}), logits);
  EXPECT_EQ(logits[3], -3.0f + 2.0f + 2.0f);
}

TEST(LogitsProcessorsTest, MinTokensBansEosAndStopIdsThenReleasesThem) {
  const SamplingParams params{.stop_token_ids = {6}, .min_tokens = 2};
  const std::vector<int32_t> eos = {2};
  OutputTokenCounts output;
  for (int step = 0; step < 4; ++step) {
    std::vector<float> logits = SevenLogits();
    ApplyLogitsProcessors(params, eos, nullptr, output, logits);
    std::vector<float> expected = SevenLogits();
    if (step < 2) expected[2] = expected[6] = -kInf;
    EXPECT_EQ(logits, expected) << "after " << step << " output tokens";
    output.Add(0);
  }
}

TEST(LogitsProcessorsTest, AllProcessorsApplyInVllmOrder) {
  // Bias first (token 1: -1 + 3 = 2), then repetition (2 / 2 = 1), then
  // frequency + presence (1 - 0.5 - 0.25 = 0.25).
  const SamplingParams params{.repetition_penalty = 2.0f,
                              .presence_penalty = 0.25f,
                              .frequency_penalty = 0.5f,
                              .logit_bias = {{1, 3.0f}}};
  std::vector<float> logits = SevenLogits();
  ApplyLogitsProcessors(params, {}, nullptr, CountsOf({1}), logits);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, 0.25f, 0.5f, -3.0f, 4.0f, 0.0f, 1.0f}));
}

TEST(LogitsProcessorsTest, DefaultParamsChangeNothing) {
  std::vector<float> logits = SevenLogits();
  const std::vector<int32_t> prompt_ids = {0, 4};
  const PromptTokenSet prompt(prompt_ids);
  const std::vector<int32_t> eos = {2};
  ApplyLogitsProcessors({}, eos, &prompt, CountsOf({0, 1}), logits);
  EXPECT_EQ(logits, SevenLogits());
}

TEST(LogitsProcessorsTest, IdsOutsideTheRowAreIgnored) {
  std::vector<float> logits = SevenLogits();
  const std::vector<int32_t> banned = {-1, 7, 100};
  BanTokens(banned, logits);
  ApplyRepetitionPenalty(2.0f, nullptr, CountsOf({9}), logits);
  EXPECT_EQ(logits, SevenLogits());
}

}  // namespace
}  // namespace ernie
