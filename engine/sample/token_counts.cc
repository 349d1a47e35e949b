#include "engine/sample/token_counts.h"

#include <algorithm>

namespace ernie {

PromptTokenSet::PromptTokenSet(std::span<const int32_t> prompt_token_ids)
    : distinct_ids_(prompt_token_ids.begin(), prompt_token_ids.end()) {
  std::sort(distinct_ids_.begin(), distinct_ids_.end());
  distinct_ids_.erase(std::unique(distinct_ids_.begin(), distinct_ids_.end()), distinct_ids_.end());
}

bool PromptTokenSet::Contains(int32_t token_id) const {
  return std::binary_search(distinct_ids_.begin(), distinct_ids_.end(), token_id);
}

void OutputTokenCounts::Add(int32_t token_id) {
  ++counts_[token_id];
  ++num_tokens_;
}

void OutputTokenCounts::Add(int32_t token_id, int32_t times) {
  if (times <= 0) return;
  counts_[token_id] += times;
  num_tokens_ += times;
}

int32_t OutputTokenCounts::CountOf(int32_t token_id) const {
  const auto it = counts_.find(token_id);
  return it == counts_.end() ? 0 : it->second;
}

}  // namespace ernie
