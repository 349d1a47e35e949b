#include "engine/sample/truncated_distribution.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace ernie {
namespace {

// Walks the buckets of one radix level from the highest key down and returns
// the one at which `reached(count, mass)` first holds, given the running totals
// of the buckets above it (which the caller's `add` accumulates). When rounding
// keeps the goal from ever being reached, the lowest non-empty bucket is the
// boundary, so the whole set is kept.
template <size_t kBuckets, typename Reached, typename Add>
uint32_t FindBoundaryBucket(const std::array<uint32_t, kBuckets>& counts,
                            const std::array<double, kBuckets>& masses, Reached reached, Add add) {
  int lowest_non_empty = -1;
  for (int b = static_cast<int>(kBuckets) - 1; b >= 0; --b) {
    const auto bucket = static_cast<size_t>(b);
    if (counts[bucket] == 0) continue;
    if (reached(counts[bucket], masses[bucket])) return static_cast<uint32_t>(b);
    lowest_non_empty = b;
    add(counts[bucket], masses[bucket]);
  }
  // Not reached: take back the lowest bucket so that it becomes the boundary.
  const auto bucket = static_cast<size_t>(lowest_non_empty);
  add(-static_cast<int64_t>(counts[bucket]), -masses[bucket]);
  return static_cast<uint32_t>(lowest_non_empty);
}

}  // namespace

uint32_t TruncatedDistribution::KeyOf(float weight) {
  // Non-negative floats order like their bit patterns.
  return std::bit_cast<uint32_t>(weight);
}

void TruncatedDistribution::Build(std::span<const float> logits, const TruncationParams& params) {
  const size_t vocab = logits.size();
  weights_.resize(vocab);
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float logit : logits) max_logit = logit > max_logit ? logit : max_logit;

  // weight = p(token) / p(best token), so min_p compares weights directly.
  const float inverse_temperature = 1.0f / params.temperature;
  const float min_p = params.min_p;
  float* weights = weights_.data();
  const float* in = logits.data();
  for (size_t i = 0; i < vocab; ++i) {
    const float weight = FastExpNonPositive((in[i] - max_logit) * inverse_temperature);
    weights[i] = weight < min_p ? 0.0f : weight;
  }

  level1_count_.fill(0);
  level1_mass_.fill(0.0);
  KeptSet all;
  for (size_t i = 0; i < vocab; ++i) {
    const float weight = weights[i];
    if (weight <= 0.0f) continue;
    const uint32_t bucket = KeyOf(weight) >> kLevel1Shift;
    ++level1_count_[bucket];
    level1_mass_[bucket] += weight;
    ++all.count;
  }
  for (double mass : level1_mass_) all.mass += mass;
  kept_ = all;  // min_key 0, no ties: every positive weight

  if (params.top_k > 0 && params.top_k < kept_.count) {
    kept_ = SelectPrefix(Goal::kCount, static_cast<double>(params.top_k));
  }
  // top_p applies to the distribution renormalized after top_k; its prefix is
  // a prefix of top_k's, so a mass goal over the whole order finds it.
  if (params.top_p < 1.0f) kept_ = SelectPrefix(Goal::kMass, static_cast<double>(params.top_p) * kept_.mass);
}

TruncatedDistribution::KeptSet TruncatedDistribution::SelectPrefix(Goal goal, double target) {
  KeptSet above;  // totals of the tokens strictly above the current boundary
  auto reached = [&](int64_t count, double mass) {
    return goal == Goal::kCount ? static_cast<double>(above.count + count) >= target : above.mass + mass >= target;
  };
  auto add = [&](int64_t count, double mass) {
    above.count += count;
    above.mass += mass;
  };

  uint32_t prefix = FindBoundaryBucket(level1_count_, level1_mass_, reached, add) << kLevel1Shift;
  candidates_.clear();
  for (size_t i = 0; i < weights_.size(); ++i) {
    const float weight = weights_[i];
    if (weight > 0.0f && (KeyOf(weight) >> kLevel1Shift) == (prefix >> kLevel1Shift)) {
      candidates_.push_back(static_cast<int32_t>(i));
    }
  }
  constexpr size_t kSubBuckets = size_t{1} << kSubLevelBits;
  constexpr uint32_t kSubMask = kSubBuckets - 1;
  for (const int shift : {kSubLevelBits, 0}) {
    std::array<uint32_t, kSubBuckets> counts{};
    std::array<double, kSubBuckets> masses{};
    for (int32_t id : candidates_) {
      const float weight = weights_[static_cast<size_t>(id)];
      const uint32_t sub = (KeyOf(weight) >> shift) & kSubMask;
      ++counts[sub];
      masses[sub] += weight;
    }
    const uint32_t boundary = FindBoundaryBucket(counts, masses, reached, add);
    std::erase_if(candidates_, [&](int32_t id) {
      return ((KeyOf(weights_[static_cast<size_t>(id)]) >> shift) & kSubMask) != boundary;
    });
    prefix |= boundary << shift;
  }

  // The candidates now all weigh exactly `prefix`'s float, in id order:
  // ties go to the smaller id.
  KeptSet kept = above;
  kept.min_key = prefix;
  for (int32_t id : candidates_) {
    ++kept.count;
    kept.mass += weights_[static_cast<size_t>(id)];
    kept.last_tied_id = id;
    if (goal == Goal::kCount ? static_cast<double>(kept.count) >= target : kept.mass >= target) break;
  }
  return kept;
}

int32_t TruncatedDistribution::Draw(double uniform01) const {
  const double target = uniform01 * kept_.mass;
  double cumulative = 0.0;
  int32_t last_kept = -1;
  for (size_t i = 0; i < weights_.size(); ++i) {
    const float weight = weights_[i];
    const auto id = static_cast<int32_t>(i);
    if (!IsKept(KeyOf(weight), id)) continue;
    cumulative += weight;
    last_kept = id;
    if (cumulative > target) return id;
  }
  return last_kept;  // rounding left the target at the very end
}

double TruncatedDistribution::Probability(int32_t token_id) const {
  if (!Contains(token_id)) return 0.0;
  return static_cast<double>(weights_[static_cast<size_t>(token_id)]) / kept_.mass;
}

}  // namespace ernie
