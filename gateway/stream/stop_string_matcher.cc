#include "gateway/stream/stop_string_matcher.h"

#include <algorithm>

namespace ernie::gateway {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings) {
  for (std::string& stop : stop_strings) {
    if (!stop.empty()) stop_strings_.push_back(std::move(stop));
  }
}

std::string StopStringMatcher::Push(std::string_view delta) {
  if (matched_) return {};
  if (stop_strings_.empty()) return std::string(delta);
  held_.append(delta);

  // The earliest match of any stop string wins (ties: the longer one).
  size_t best = std::string::npos;
  for (const std::string& stop : stop_strings_) {
    const size_t at = held_.find(stop);
    if (at != std::string::npos &&
        (best == std::string::npos || at < best || (at == best && stop.size() > matched_stop_.size()))) {
      best = at;
      matched_stop_ = stop;
    }
  }
  if (best != std::string::npos) {
    matched_ = true;
    std::string out = held_.substr(0, best);
    held_.clear();
    return out;
  }

  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const std::string& stop : stop_strings_) {
    const size_t longest = std::min(stop.size() - 1, held_.size());
    for (size_t length = longest; length > hold; --length) {
      if (std::string_view(held_).substr(held_.size() - length) == std::string_view(stop).substr(0, length)) {
        hold = length;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopStringMatcher::Flush() {
  if (matched_) return {};
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace ernie::gateway
