#include "engine/sample/truncated_distribution.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/sample/philox.h"

namespace ernie {
namespace {

// The obvious, slow definition the fast one must match: sort everything by
// (probability desc, id asc), drop below min_p, keep top_k, then the shortest
// prefix whose renormalized mass reaches top_p. Returns p(token) per id.
std::vector<double> ReferenceDistribution(const std::vector<float>& logits, const TruncationParams& params) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  std::vector<double> weight(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) weight[i] = std::exp((logits[i] - max_logit) / params.temperature);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  size_t keep = 0;
  while (keep < order.size() && weight[order[keep]] >= params.min_p) ++keep;
  if (params.top_k > 0) keep = std::min(keep, static_cast<size_t>(params.top_k));
  double kept_mass = 0.0;
  for (size_t i = 0; i < keep; ++i) kept_mass += weight[order[i]];
  if (params.top_p < 1.0f) {
    double cumulative = 0.0;
    size_t prefix = 0;
    while (prefix < keep && cumulative < params.top_p * kept_mass) cumulative += weight[order[prefix++]];
    keep = prefix;
    kept_mass = cumulative;
  }
  std::vector<double> probability(logits.size(), 0.0);
  for (size_t i = 0; i < keep; ++i) probability[order[i]] = weight[order[i]] / kept_mass;
  return probability;
}

std::vector<float> RandomLogits(size_t vocab, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> logits(vocab);
  for (float& logit : logits) logit = normal(rng);
  return logits;
}

void ExpectMatchesReference(const std::vector<float>& logits, const TruncationParams& params) {
  TruncatedDistribution distribution;
  distribution.Build(logits, params);
  const std::vector<double> expected = ReferenceDistribution(logits, params);
  int64_t expected_count = 0;
  for (size_t id = 0; id < logits.size(); ++id) {
    const auto token = static_cast<int32_t>(id);
    ASSERT_EQ(distribution.Contains(token), expected[id] > 0.0)
        << "token " << id << " T=" << params.temperature << " top_k=" << params.top_k << " top_p=" << params.top_p
        << " min_p=" << params.min_p;
    EXPECT_NEAR(distribution.Probability(token), expected[id], 1e-6);
    expected_count += expected[id] > 0.0;
  }
  EXPECT_EQ(distribution.kept_count(), expected_count);
  EXPECT_GE(distribution.kept_count(), 1);
}

TEST(TruncatedDistributionTest, SupportMatchesTheSortingDefinitionExactly) {
  const std::vector<TruncationParams> configurations = {
      {.temperature = 1.0f},
      {.temperature = 0.8f, .top_p = 0.8f},
      {.temperature = 1.3f, .top_p = 0.3f},
      {.temperature = 0.7f, .top_k = 5},
      {.temperature = 1.0f, .top_k = 1},
      {.temperature = 0.9f, .top_k = 40, .top_p = 0.5f},
      {.temperature = 1.0f, .min_p = 0.1f},
      {.temperature = 0.5f, .top_k = 20, .top_p = 0.9f, .min_p = 0.02f},
      {.temperature = 2.0f, .top_p = 0.01f},  // only the best token
      {.temperature = 1.0f, .min_p = 1.0f},   // only the best token
  };
  uint32_t seed = 1;
  for (size_t vocab : {7u, 97u, 1002u, 5000u}) {
    for (float stddev : {0.05f, 1.0f, 4.0f}) {
      for (const TruncationParams& params : configurations) {
        SCOPED_TRACE(testing::Message() << "vocab " << vocab << " stddev " << stddev);
        ExpectMatchesReference(RandomLogits(vocab, stddev, seed++), params);
      }
    }
  }
}

TEST(TruncatedDistributionTest, TiesGoToTheSmallerId) {
  // Ids 1, 3, 4 and 6 share the top logit; top_k 2 keeps 1 and 3.
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f, 2.0f, 2.0f, -1.0f, 2.0f};
  TruncatedDistribution distribution;
  distribution.Build(logits, {.temperature = 1.0f, .top_k = 2});
  for (int32_t id = 0; id < 7; ++id) EXPECT_EQ(distribution.Contains(id), id == 1 || id == 3) << id;
  // Four equal tokens, top_p 0.6 of their mass: three of them (0.75 >= 0.6 > 0.5).
  distribution.Build(logits, {.temperature = 1.0f, .top_k = 4, .top_p = 0.6f});
  for (int32_t id = 0; id < 7; ++id) EXPECT_EQ(distribution.Contains(id), id == 1 || id == 3 || id == 4) << id;
  // A flat row: everything ties.
  const std::vector<float> flat(97, 0.5f);
  distribution.Build(flat, {.temperature = 1.0f, .top_p = 0.5f});
  EXPECT_EQ(distribution.kept_count(), 49);
  EXPECT_TRUE(distribution.Contains(48));
  EXPECT_FALSE(distribution.Contains(49));
}

TEST(TruncatedDistributionTest, NegativeInfinityIsNeverKept) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {-inf, 1.0f, -inf, 0.5f, -inf};
  TruncatedDistribution distribution;
  distribution.Build(logits, {.temperature = 1.0f});
  EXPECT_EQ(distribution.kept_count(), 2);
  for (int i = 0; i < 1000; ++i) {
    const int32_t token = distribution.Draw(SamplingUniform(3, 0, static_cast<uint64_t>(i)));
    EXPECT_TRUE(token == 1 || token == 3) << token;
  }
}

TEST(TruncatedDistributionTest, DrawsNeverLeaveTheSupport) {
  const std::vector<float> logits = RandomLogits(1002, 2.0f, 77);
  TruncatedDistribution distribution;
  distribution.Build(logits, {.temperature = 0.8f, .top_k = 30, .top_p = 0.8f});
  for (int i = 0; i < 5000; ++i) {
    ASSERT_TRUE(distribution.Contains(distribution.Draw(SamplingUniform(5, 0, static_cast<uint64_t>(i)))));
  }
  // The ends of [0, 1) land on kept tokens too.
  EXPECT_TRUE(distribution.Contains(distribution.Draw(0.0)));
  EXPECT_TRUE(distribution.Contains(distribution.Draw(std::nextafter(1.0, 0.0))));
}

TEST(TruncatedDistributionTest, DrawFrequenciesMatchTheProbabilities) {
  const std::vector<float> logits = RandomLogits(97, 1.5f, 11);
  const TruncationParams params{.temperature = 0.9f, .top_p = 0.9f};
  TruncatedDistribution distribution;
  distribution.Build(logits, params);
  constexpr int kDraws = 200000;
  std::vector<int> hits(logits.size(), 0);
  for (int i = 0; i < kDraws; ++i) ++hits[distribution.Draw(SamplingUniform(8, 0, static_cast<uint64_t>(i)))];
  // Pearson's chi-square over the kept tokens (expected count >= 5 each).
  double chi_square = 0.0;
  int degrees = -1;
  for (size_t id = 0; id < logits.size(); ++id) {
    const double expected = distribution.Probability(static_cast<int32_t>(id)) * kDraws;
    if (expected == 0.0) {
      EXPECT_EQ(hits[id], 0);
      continue;
    }
    chi_square += (hits[id] - expected) * (hits[id] - expected) / expected;
    ++degrees;
  }
  ASSERT_GT(degrees, 10);
  // Mean `degrees`, sd sqrt(2 degrees): 5 sd above is far beyond chance.
  EXPECT_LT(chi_square, degrees + 5.0 * std::sqrt(2.0 * degrees)) << degrees << " degrees of freedom";
}

TEST(FastExpTest, MatchesStdExpOnTheSamplersDomain) {
  for (float x = -86.9f; x <= 0.0f; x += 0.0137f) {
    EXPECT_NEAR(FastExpNonPositive(x) / std::exp(x), 1.0, 3e-7) << x;
  }
  EXPECT_EQ(FastExpNonPositive(0.0f), 1.0f);
  EXPECT_EQ(FastExpNonPositive(-100.0f), 0.0f);
  EXPECT_EQ(FastExpNonPositive(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(FastExpNonPositive(std::numeric_limits<float>::quiet_NaN()), 0.0f);
}

}  // namespace
}  // namespace ernie
