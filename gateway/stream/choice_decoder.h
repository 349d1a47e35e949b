// One choice of a generation: token ids in, the text to show out, through
// the incremental detokenizer and the stop-string matcher. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gateway/stream/stop_string_matcher.h"
#include "services/tokenizer/detokenizer/detokenizer_table.h"
#include "services/tokenizer/detokenizer/incremental_detokenizer.h"

namespace ernie::gateway {

class ChoiceDecoder {
 public:
  ChoiceDecoder(std::shared_ptr<const tokenizer::DetokenizerTable> table, bool skip_special_tokens,
                std::vector<std::string> stop_strings);

  // The text `ids` add that may be shown now. InvalidArgument for an id the
  // vocabulary lacks (a worker/tokenizer mismatch).
  absl::StatusOr<std::string> Append(absl::Span<const int32_t> ids);
  // The worker finished this sample: the rest of the held-back text.
  std::string Finish();

  bool stopped_by_string() const { return stop_.matched(); }
  const std::string& text() const { return text_; }  // everything shown so far

 private:
  std::shared_ptr<const tokenizer::DetokenizerTable> table_;  // what ids have text
  tokenizer::IncrementalDetokenizer detokenizer_;
  StopStringMatcher stop_;
  std::string text_;  // the concatenation of every returned delta
};

}  // namespace ernie::gateway
