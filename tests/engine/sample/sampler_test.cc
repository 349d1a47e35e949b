#include "engine/sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "engine/sample/logprobs.h"

namespace ernie {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> RandomLogits(size_t count, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> logits(count);
  for (float& logit : logits) logit = normal(rng);
  return logits;
}

Sampler MakeSampler(int32_t vocab, std::vector<int32_t> eos = {}) {
  absl::StatusOr<Sampler> sampler = Sampler::Create({.vocab_size = vocab, .eos_token_ids = std::move(eos)});
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  return *std::move(sampler);
}

SamplerRow RowFor(const SamplingParams& params, uint64_t seed, uint32_t sample_index = 0) {
  return SamplerRow{.params = &params, .seed = seed, .sample_index = sample_index};
}

std::vector<SampledToken> SampleOrDie(Sampler& sampler, std::vector<float> logits, std::span<const SamplerRow> rows) {
  absl::StatusOr<std::vector<SampledToken>> tokens = sampler.Sample(logits, rows);
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  return tokens.ok() ? *std::move(tokens) : std::vector<SampledToken>{};
}

TEST(SamplerTest, GreedyPicksTheArgmaxAndTiesToTheSmallerId) {
  Sampler sampler = MakeSampler(7);
  const SamplingParams greedy{.temperature = 0.0f};
  std::vector<SamplerRow> rows;
  rows.push_back(RowFor(greedy, 1));
  rows.push_back(RowFor(greedy, 2));
  // Row 0: a unique maximum at 4. Row 1: ids 2 and 5 tie for the maximum.
  const std::vector<float> logits = {0.f, 1.f, 2.f, 3.f, 9.f, 1.f, 0.f,  //
                                     0.f, 1.f, 5.f, 3.f, 4.f, 5.f, -kInf};
  const std::vector<SampledToken> tokens = SampleOrDie(sampler, logits, rows);
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(tokens[0].token_id, 4);
  EXPECT_EQ(tokens[1].token_id, 2);
  EXPECT_FALSE(tokens[0].logprob.has_value());
}

TEST(SamplerTest, GreedyReadsTheProcessedLogits) {
  Sampler sampler = MakeSampler(7);
  const SamplingParams params{.temperature = 0.0f, .logit_bias = {{0, 100.0f}}};
  const std::vector<SamplerRow> rows = {RowFor(params, 1)};
  EXPECT_EQ(SampleOrDie(sampler, {0.f, 1.f, 2.f, 3.f, 9.f, 1.f, 0.f}, rows)[0].token_id, 0);
}

TEST(SamplerTest, TemperatureSamplingFollowsTheSoftmax) {
  constexpr int32_t kVocab = 7;
  Sampler sampler = MakeSampler(kVocab);
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -1.0f, 1.5f, 0.5f, -0.5f};
  const SamplingParams params{.temperature = 0.7f};
  std::vector<double> probability(kVocab);
  double total = 0.0;
  for (int32_t i = 0; i < kVocab; ++i) total += probability[i] = std::exp(logits[i] / 0.7);
  for (double& p : probability) p /= total;

  constexpr int kDraws = 20000;
  std::vector<int> hits(kVocab, 0);
  for (int draw = 0; draw < kDraws; ++draw) {
    // Different seeds, one draw each: the seed alone decides.
    const std::vector<SamplerRow> rows = {RowFor(params, static_cast<uint64_t>(draw))};
    ++hits[SampleOrDie(sampler, logits, rows)[0].token_id];
  }
  double chi_square = 0.0;
  for (int32_t i = 0; i < kVocab; ++i) {
    const double expected = probability[i] * kDraws;
    chi_square += (hits[i] - expected) * (hits[i] - expected) / expected;
  }
  EXPECT_LT(chi_square, 22.46);  // chi-square, 6 degrees of freedom, p = 0.001
}

TEST(SamplerTest, TruncationRestrictsTheSupport) {
  constexpr int32_t kVocab = 97;
  Sampler sampler = MakeSampler(kVocab);
  const std::vector<float> logits = RandomLogits(kVocab, 2.0f, 5);
  std::vector<int32_t> order(kVocab);
  for (int32_t i = 0; i < kVocab; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });

  const SamplingParams top3{.temperature = 1.0f, .top_k = 3};
  const SamplingParams tiny_top_p{.temperature = 1.0f, .top_p = 1e-6f};
  const SamplingParams all_min_p{.temperature = 1.0f, .min_p = 1.0f};
  std::map<int32_t, int> top3_hits;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    const std::vector<SamplerRow> rows = {RowFor(top3, seed), RowFor(tiny_top_p, seed), RowFor(all_min_p, seed)};
    std::vector<float> batch;
    for (int r = 0; r < 3; ++r) batch.insert(batch.end(), logits.begin(), logits.end());
    const std::vector<SampledToken> tokens = SampleOrDie(sampler, batch, rows);
    ++top3_hits[tokens[0].token_id];
    EXPECT_EQ(tokens[1].token_id, order[0]);  // top_p keeps at least the best token
    EXPECT_EQ(tokens[2].token_id, order[0]);  // min_p 1 keeps only the best
  }
  EXPECT_EQ(top3_hits.size(), 3u);
  for (int32_t id : {order[0], order[1], order[2]}) EXPECT_GT(top3_hits[id], 0);
}

TEST(SamplerTest, MinTokensBansEosAndStopTokensThenReleases) {
  Sampler sampler = MakeSampler(7, {2});
  const SamplingParams params{.temperature = 0.0f, .stop_token_ids = {5}, .min_tokens = 3};
  // Greedy would pick eos (2) at once, then the stop token (5).
  const std::vector<float> logits = {0.f, 0.f, 9.f, 0.f, 1.f, 8.f, 0.f};
  SamplerRow row = RowFor(params, 1);
  std::vector<int32_t> produced;
  for (int step = 0; step < 4; ++step) {
    const std::vector<SampledToken> tokens = SampleOrDie(sampler, logits, std::span<const SamplerRow>(&row, 1));
    produced.push_back(tokens[0].token_id);
    row.output.Add(tokens[0].token_id);
  }
  EXPECT_EQ(produced, (std::vector<int32_t>{4, 4, 4, 2}));
}

TEST(SamplerTest, PenaltiesReachTheDraw) {
  Sampler sampler = MakeSampler(7);
  const std::vector<float> logits = {0.f, 0.f, 3.f, 0.f, 2.5f, 0.f, 0.f};
  const SamplingParams repetition{.temperature = 0.0f, .repetition_penalty = 2.0f};
  const SamplingParams presence{.temperature = 0.0f, .presence_penalty = 1.0f};
  const std::vector<int32_t> prompt = {2};
  std::vector<SamplerRow> rows = {RowFor(repetition, 1), RowFor(presence, 1), RowFor(presence, 1)};
  rows[0].prompt_tokens = std::make_shared<PromptTokenSet>(prompt);  // 3 / 2 < 2.5
  rows[1].prompt_tokens = rows[0].prompt_tokens;                     // presence ignores the prompt
  rows[2].output.Add(2);                                             // 3 - 1 < 2.5
  std::vector<float> batch;
  for (int r = 0; r < 3; ++r) batch.insert(batch.end(), logits.begin(), logits.end());
  const std::vector<SampledToken> tokens = SampleOrDie(sampler, batch, rows);
  EXPECT_EQ(tokens[0].token_id, 4);
  EXPECT_EQ(tokens[1].token_id, 2);
  EXPECT_EQ(tokens[2].token_id, 4);
}

// Runs `steps` steps of the row with seed 42 inside a batch of `others`
// (which change every step), at position `slot`, and returns its tokens.
std::vector<int32_t> TokensOfSeed42(size_t slot, size_t others, uint32_t noise_seed) {
  constexpr int32_t kVocab = 1002;
  Sampler sampler = MakeSampler(kVocab);
  const SamplingParams params{.temperature = 0.9f, .top_p = 0.9f, .seed = 42};
  const SamplingParams other_params{.temperature = 1.2f, .top_k = 50};
  std::vector<SamplerRow> rows;
  for (size_t i = 0; i <= others; ++i) rows.push_back(RowFor(other_params, noise_seed + i));
  rows[slot] = RowFor(params, *params.seed);
  std::vector<int32_t> produced;
  for (uint32_t step = 0; step < 20; ++step) {
    std::vector<float> batch;
    for (size_t r = 0; r < rows.size(); ++r) {
      // Our row's logits depend on the step only; the others' on everything.
      const std::vector<float> logits =
          RandomLogits(kVocab, 2.0f, r == slot ? 1000 + step : noise_seed * 7919 + static_cast<uint32_t>(r) * 31 + step);
      batch.insert(batch.end(), logits.begin(), logits.end());
    }
    const std::vector<SampledToken> tokens = SampleOrDie(sampler, batch, rows);
    for (size_t r = 0; r < rows.size(); ++r) rows[r].output.Add(tokens[r].token_id);
    produced.push_back(tokens[slot].token_id);
  }
  return produced;
}

TEST(SamplerTest, SameSeedSameTokensWhateverTheBatch) {
  const std::vector<int32_t> alone = TokensOfSeed42(0, 0, 1);
  EXPECT_EQ(TokensOfSeed42(0, 3, 2), alone);
  EXPECT_EQ(TokensOfSeed42(3, 3, 3), alone);
  EXPECT_EQ(TokensOfSeed42(5, 9, 4), alone);
}

TEST(SamplerTest, DifferentSeedsAndSampleIndicesDiffer) {
  constexpr int32_t kVocab = 1002;
  Sampler sampler = MakeSampler(kVocab);
  const SamplingParams params{.temperature = 1.0f};
  const std::vector<float> logits = RandomLogits(kVocab, 0.5f, 9);  // nearly flat: draws spread out
  std::vector<SamplerRow> rows;
  for (uint64_t seed = 0; seed < 8; ++seed) rows.push_back(RowFor(params, seed));
  for (uint32_t sample = 1; sample < 8; ++sample) rows.push_back(RowFor(params, 0, sample));
  std::vector<float> batch;
  for (size_t r = 0; r < rows.size(); ++r) batch.insert(batch.end(), logits.begin(), logits.end());
  const std::vector<SampledToken> tokens = SampleOrDie(sampler, batch, rows);
  std::set<int32_t> distinct;
  for (const SampledToken& token : tokens) distinct.insert(token.token_id);
  EXPECT_GE(distinct.size(), 12u);  // 15 draws over ~1000 similar tokens rarely collide
}

TEST(SamplerTest, LogprobsAreTheLogSoftmaxOfTheRawLogits) {
  constexpr int32_t kVocab = 1002;
  Sampler sampler = MakeSampler(kVocab);
  const std::vector<float> logits = RandomLogits(kVocab, 3.0f, 21);
  std::vector<float> expected(kVocab);
  LogSoftmax(logits, expected);
  // Penalties and temperature must not show in the logprobs.
  const SamplingParams params{.temperature = 0.5f, .top_k = 10, .logit_bias = {{7, 50.0f}}, .logprobs = true,
                              .top_logprobs = 5};
  const SamplingParams no_top{.temperature = 0.0f, .logprobs = true};
  const std::vector<SamplerRow> rows = {RowFor(params, 3), RowFor(no_top, 3)};
  std::vector<float> batch = logits;
  batch.insert(batch.end(), logits.begin(), logits.end());
  const std::vector<SampledToken> tokens = SampleOrDie(sampler, batch, rows);
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(tokens[0].token_id, 7);  // the bias of 50 wins the draw
  ASSERT_TRUE(tokens[0].logprob.has_value());
  EXPECT_NEAR(*tokens[0].logprob, expected[7], 1e-5);
  const std::vector<std::pair<int32_t, float>> best = TopK(expected, 5);
  ASSERT_EQ(tokens[0].top_logprobs.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(tokens[0].top_logprobs[i].token_id, best[i].first);
    EXPECT_NEAR(tokens[0].top_logprobs[i].logprob, best[i].second, 1e-5);
    if (i > 0) {
      EXPECT_GE(tokens[0].top_logprobs[i - 1].logprob, tokens[0].top_logprobs[i].logprob);
    }
  }
  EXPECT_NEAR(*tokens[1].logprob, expected[best[0].first], 1e-5);
  EXPECT_TRUE(tokens[1].top_logprobs.empty());
}

TEST(SamplerTest, RowsMayComeAsPointers) {
  Sampler sampler = MakeSampler(7);
  const SamplingParams greedy{.temperature = 0.0f};
  const SamplerRow a = RowFor(greedy, 1), b = RowFor(greedy, 2);
  const std::vector<const SamplerRow*> rows = {&b, &a};
  std::vector<float> logits = {0.f, 9.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 9.f, 0.f};
  absl::StatusOr<std::vector<SampledToken>> tokens = sampler.Sample(logits, rows);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ((*tokens)[0].token_id, 1);
  EXPECT_EQ((*tokens)[1].token_id, 5);
}

TEST(SamplerTest, BadInputsAreErrors) {
  EXPECT_EQ(Sampler::Create({.vocab_size = 0}).status().message(), "vocab_size must be at least 1, got 0");
  EXPECT_EQ(Sampler::Create({.vocab_size = 7, .eos_token_ids = {7}}).status().message(),
            "eos_token_ids contains token id 7, outside the vocabulary [0, 7)");
  Sampler sampler = MakeSampler(7);
  const SamplingParams params;
  const std::vector<SamplerRow> rows = {RowFor(params, 1)};
  std::vector<float> short_logits(6, 0.0f);
  EXPECT_EQ(sampler.Sample(short_logits, rows).status().message(),
            "logits must hold rows x vocab_size = 1 x 7 values, got 6");
  std::vector<float> dead(7, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(sampler.Sample(dead, rows).status().message(),
            "logits row 0 has no finite value after processing (all -inf or NaN)");
  const std::vector<SamplerRow> no_params = {SamplerRow{}};
  std::vector<float> logits(7, 0.0f);
  EXPECT_EQ(sampler.Sample(logits, no_params).status().message(), "sampler row 0 has no sampling params");
}

TEST(SamplerTest, RequestSeedKeepsAGivenSeed) {
  EXPECT_EQ(RequestSeed({.seed = 1234}), 1234u);
  EXPECT_NE(RequestSeed({}), RequestSeed({}));
}

}  // namespace
}  // namespace ernie
