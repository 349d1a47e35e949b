// The distribution a random (non-greedy) draw comes from: softmax(logits / T),
// truncated by min_p, then top_k, then top_p, as vLLM applies them.
//
// Every truncation keeps a prefix of the tokens in the order (probability
// desc, id asc), so the kept set is one threshold on the weight plus, among
// tokens of exactly the threshold weight, the ones up to some id. The
// thresholds are found by a three-level radix select over the float bits of
// the weights (10 bits each; the first level's histogram is built in the
// same pass as the weights), never by sorting the vocabulary: O(vocab) per row
// plus work on the few tokens that share the boundary bucket.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sample/fast_exp.h"

namespace ernie {

struct TruncationParams {
  float temperature = 1.0f;  // > 0
  int32_t top_k = -1;        // <= 0: off
  float top_p = 1.0f;        // in (0, 1]; 1: off
  float min_p = 0.0f;        // in [0, 1]; 0: off
};

// Workspace and result in one object, reused across rows (the buffers grow to
// the vocabulary once). Not thread-safe; one per sampling thread.
class TruncatedDistribution {
 public:
  // `logits` must hold at least one finite value (NaN entries count as -inf).
  void Build(std::span<const float> logits, const TruncationParams& params);

  // The kept token whose cumulative probability (over kept tokens in id
  // order) first exceeds `uniform01` in [0, 1).
  int32_t Draw(double uniform01) const;

  bool Contains(int32_t token_id) const { return IsKept(KeyOf(weights_[static_cast<size_t>(token_id)]), token_id); }
  // Probability of `token_id` after truncation and renormalization.
  double Probability(int32_t token_id) const;
  // Number of kept tokens (a scan: for tests and diagnostics).
  int64_t kept_count() const;

 private:
  // Weights are in [0, 1], so keys are <= 0x3F800000 and key >> 20 < 2^10.
  static constexpr int kLevel1Bits = 10;
  static constexpr int kSubLevelBits = 10;
  static constexpr int kLevel1Shift = 2 * kSubLevelBits;

  // The kept set: every token with key > min_key, plus the tokens with key ==
  // min_key and id <= last_tied_id.
  struct KeptSet {
    uint32_t min_key = 0;
    int32_t last_tied_id = -1;
    double mass = 0.0;  // sum of kept weights
    int64_t count = 0;
  };
  enum class Goal { kCount, kMass };

  static uint32_t KeyOf(float weight);
  // The first-level histogram of the positive weights, and their totals.
  void BuildLevel1Histogram();
  // Sum and count of the positive weights, without a histogram.
  void SumAllWeights();
  bool IsKept(uint32_t key, int32_t token_id) const {
    return key > kept_.min_key || (key == kept_.min_key && token_id <= kept_.last_tied_id);
  }
  // Sum of the kept weights of tokens [begin, end).
  float KeptMass(size_t begin, size_t end) const;
  // The shortest prefix whose count (or mass) reaches `target`.
  KeptSet SelectPrefix(Goal goal, double target);

  std::vector<float> weights_;  // [vocab] exp((logit - max) / T), 0 where dropped
  std::array<uint32_t, 1u << kLevel1Bits> level1_count_{};  // per bucket of key >> 20
  std::array<double, 1u << kLevel1Bits> level1_mass_{};
  // Four interleaved partial histograms: consecutive tokens of a flat row hit
  // the same bucket, and one histogram would serialize on that memory.
  static constexpr size_t kHistogramCopies = 4;
  std::array<std::array<uint32_t, 1u << kLevel1Bits>, kHistogramCopies> partial_count_{};
  std::array<std::array<double, 1u << kLevel1Bits>, kHistogramCopies> partial_mass_{};
  std::vector<int32_t> candidates_;  // ids in the boundary bucket being refined
  KeptSet kept_;
};

}  // namespace ernie
