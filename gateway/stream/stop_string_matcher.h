// Finds stop strings in streamed text. Text that might be the beginning of
// a stop string is held back until the next delta decides it, so no client
// ever sees part of a stop string; a match ends the text before it.
//
// Input deltas must be whole UTF-8 characters (the incremental detokenizer
// guarantees it); then every cut falls on a character boundary, because a
// held-back suffix begins where some stop string (valid UTF-8) begins.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ernie::gateway {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stop_strings);

  // Adds `delta` and returns the text that is now safe to show. After a
  // match it returns the text up to the earliest stop string and matched()
  // turns true; later calls return "".
  std::string Push(std::string_view delta);
  // The end of the stream: returns the held-back text (nothing matched).
  std::string Flush();

  bool matched() const { return matched_; }
  const std::string& matched_stop() const { return matched_stop_; }
  size_t held_bytes() const { return held_.size(); }

 private:
  std::vector<std::string> stop_strings_;  // non-empty strings
  std::string held_;          // not yet shown; always shorter than the longest stop string
  bool matched_ = false;
  std::string matched_stop_;  // which stop string ended the text
};

}  // namespace ernie::gateway
