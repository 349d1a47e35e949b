#include "engine/sample/truncated_distribution.h"

#include "engine/sample/row_max.h"

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
  const float max_logit = RowMax(logits);

  // weight = p(token) / p(best token), so min_p compares weights directly.
  const float inverse_temperature = 1.0f / params.temperature;
  const float min_p = params.min_p;
  float* weights = weights_.data();
  const float* in = logits.data();
  for (size_t i = 0; i < vocab; ++i) {
    const float weight = FastExpNonPositive((in[i] - max_logit) * inverse_temperature);
    weights[i] = weight >= min_p ? weight : 0.0f;
  }

  // Without truncation the kept set is every positive weight: no histogram.
  const bool truncates = (params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab) || params.top_p < 1.0f;
  if (truncates) {
    BuildLevel1Histogram();
  } else {
    SumAllWeights();
  }
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab) {
    kept_ = SelectPrefix(Goal::kCount, static_cast<double>(params.top_k));
  }
  // top_p applies to the distribution renormalized after top_k; its prefix is
  // a prefix of top_k's, so a mass goal over the whole order finds it.
  if (params.top_p < 1.0f) kept_ = SelectPrefix(Goal::kMass, static_cast<double>(params.top_p) * kept_.mass);
}

void TruncatedDistribution::BuildLevel1Histogram() {
  for (size_t copy = 0; copy < kHistogramCopies; ++copy) {
    partial_count_[copy].fill(0);
    partial_mass_[copy].fill(0.0);
  }
  constexpr uint32_t kLastBucket = (1u << kLevel1Bits) - 1;
  for (size_t i = 0; i < weights_.size(); ++i) {
    const float weight = weights_[i];
    if (weight <= 0.0f) continue;
    const uint32_t bucket = std::min(KeyOf(weight) >> kLevel1Shift, kLastBucket);
    const size_t copy = i % kHistogramCopies;
    ++partial_count_[copy][bucket];
    partial_mass_[copy][bucket] += weight;
  }
  kept_ = KeptSet{};  // min_key 0, no ties: every positive weight
  for (size_t bucket = 0; bucket <= kLastBucket; ++bucket) {
    uint32_t count = 0;
    double mass = 0.0;
    for (size_t copy = 0; copy < kHistogramCopies; ++copy) {
      count += partial_count_[copy][bucket];
      mass += partial_mass_[copy][bucket];
    }
    level1_count_[bucket] = count;
    level1_mass_[bucket] = mass;
    kept_.count += count;
    kept_.mass += mass;
  }
}

void TruncatedDistribution::SumAllWeights() {
  // Independent lanes so the additions do not wait on each other.
  constexpr size_t kLanes = 8;
  std::array<double, kLanes> sums{};
  std::array<int64_t, kLanes> counts{};
  const float* weights = weights_.data();
  size_t i = 0;
  for (; i + kLanes <= weights_.size(); i += kLanes) {
    for (size_t lane = 0; lane < kLanes; ++lane) {
      sums[lane] += weights[i + lane];
      counts[lane] += weights[i + lane] > 0.0f;
    }
  }
  for (; i < weights_.size(); ++i) {
    sums[0] += weights[i];
    counts[0] += weights[i] > 0.0f;
  }
  kept_ = KeptSet{};
  for (size_t lane = 0; lane < kLanes; ++lane) {
    kept_.mass += sums[lane];
    kept_.count += counts[lane];
  }
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

float TruncatedDistribution::KeptMass(size_t begin, size_t end) const {
  constexpr size_t kLanes = 8;  // independent lanes: the sum vectorizes
  std::array<float, kLanes> lanes{};
  size_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    for (size_t lane = 0; lane < kLanes; ++lane) {
      const float weight = weights_[i + lane];
      lanes[lane] += IsKept(KeyOf(weight), static_cast<int32_t>(i + lane)) ? weight : 0.0f;
    }
  }
  for (; i < end; ++i) lanes[0] += IsKept(KeyOf(weights_[i]), static_cast<int32_t>(i)) ? weights_[i] : 0.0f;
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}

int32_t TruncatedDistribution::Draw(double uniform01) const {
  const double target = uniform01 * kept_.mass;
  const size_t vocab = weights_.size();
  // Skip whole blocks by their kept mass, then walk the block in which the
  // running total passes the target one token at a time (on into the next
  // blocks if rounding of the block sums misjudged it).
  constexpr size_t kBlock = 256;
  double cumulative = 0.0;
  size_t begin = 0;
  for (; begin < vocab; begin += kBlock) {
    const double block_mass = KeptMass(begin, std::min(begin + kBlock, vocab));
    if (cumulative + block_mass > target) break;
    cumulative += block_mass;
  }
  for (size_t i = begin; i < vocab; ++i) {
    if (!IsKept(KeyOf(weights_[i]), static_cast<int32_t>(i))) continue;
    cumulative += weights_[i];
    if (cumulative > target) return static_cast<int32_t>(i);
  }
  // Rounding left the target at the very end: the last kept token.
  for (size_t i = vocab; i-- > 0;) {
    if (IsKept(KeyOf(weights_[i]), static_cast<int32_t>(i))) return static_cast<int32_t>(i);
  }
  return -1;  // unreachable: the best token has weight 1 and is always kept
}

int64_t TruncatedDistribution::kept_count() const {
  int64_t count = 0;
  for (size_t i = 0; i < weights_.size(); ++i) count += Contains(static_cast<int32_t>(i));
  return count;
}

double TruncatedDistribution::Probability(int32_t token_id) const {
  if (!Contains(token_id)) return 0.0;
  return static_cast<double>(weights_[static_cast<size_t>(token_id)]) / kept_.mass;
}

}  // namespace ernie
