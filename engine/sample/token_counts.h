// The token statistics the penalties read, kept by the caller per sample and
// updated incrementally: the prompt's distinct tokens are collected once at
// admission (and shared by a request's n samples), output counts grow by one
// token per step. No step rescans the prompt or the output.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace ernie {

// The distinct token ids of a prompt, sorted ascending. Immutable once built,
// so one instance may be shared (read-only) by every sample of a request.
class PromptTokenSet {
 public:
  PromptTokenSet() = default;
  explicit PromptTokenSet(std::span<const int32_t> prompt_token_ids);

  bool Contains(int32_t token_id) const;
  std::span<const int32_t> distinct_ids() const { return distinct_ids_; }

 private:
  std::vector<int32_t> distinct_ids_;  // sorted, unique
};

// How often each token occurs in one sample's output so far.
class OutputTokenCounts {
 public:
  // Records one sampled token (call once per token the sequence keeps).
  void Add(int32_t token_id);
  // Records `times` (>= 0) copies of one token at once.
  void Add(int32_t token_id, int32_t times);

  // Number of output tokens so far: also the output position of the next draw.
  int64_t num_tokens() const { return num_tokens_; }
  int32_t CountOf(int32_t token_id) const;
  // token id -> count (> 0), in no particular order.
  const absl::flat_hash_map<int32_t, int32_t>& counts() const { return counts_; }

 private:
  absl::flat_hash_map<int32_t, int32_t> counts_;  // only tokens seen, count > 0
  int64_t num_tokens_ = 0;                        // sum of counts_
};

}  // namespace ernie
