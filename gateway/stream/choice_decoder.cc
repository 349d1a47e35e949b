#include "gateway/stream/choice_decoder.h"

#include "engine/util/status_macros.h"

namespace ernie::gateway {

ChoiceDecoder::ChoiceDecoder(std::shared_ptr<const tokenizer::DetokenizerTable> table, bool skip_special_tokens,
                             std::vector<std::string> stop_strings)
    : detokenizer_(std::move(table), skip_special_tokens), stop_(std::move(stop_strings)) {}

absl::StatusOr<std::string> ChoiceDecoder::Append(absl::Span<const int32_t> ids) {
  if (stop_.matched()) return std::string();
  std::string piece;
  ERNIE_RETURN_IF_ERROR(detokenizer_.Append(ids, &piece));
  std::string shown = stop_.Push(piece);
  text_ += shown;
  return shown;
}

std::string ChoiceDecoder::Finish() {
  if (stop_.matched()) return {};
  std::string piece;
  detokenizer_.Finish(&piece);
  std::string shown = stop_.Push(piece);
  if (!stop_.matched()) shown += stop_.Flush();
  text_ += shown;
  return shown;
}

}  // namespace ernie::gateway
