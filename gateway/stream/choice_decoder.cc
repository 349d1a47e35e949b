#include "gateway/stream/choice_decoder.h"

#include "engine/util/status_macros.h"

namespace ernie::gateway {

ChoiceDecoder::ChoiceDecoder(std::shared_ptr<const tokenizer::DetokenizerTable> table, bool skip_special_tokens,
                             std::vector<std::string> stop_strings)
    : table_(table), detokenizer_(std::move(table), skip_special_tokens), stop_(std::move(stop_strings)) {}

absl::StatusOr<std::string> ChoiceDecoder::Append(absl::Span<const int32_t> ids) {
  if (stop_.matched()) return std::string();
  // A model may sample a row past the tokenizer's vocabulary (ERNIE-4.5's
  // 103,424 embedding rows outnumber its ~101,300 tokens; random or badly
  // trained weights pick them): such a token has no text, as in HF's decode,
  // and must not fail the request (found by tools/soak).
  std::vector<int32_t> known;
  known.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id < table_->size() && table_->entry(id).kind != tokenizer::DecodeKind::kAbsent) known.push_back(id);
  }
  std::string piece;
  ERNIE_RETURN_IF_ERROR(detokenizer_.Append(known, &piece));
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
