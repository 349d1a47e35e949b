#include "services/tokenizer/detokenizer/incremental_detokenizer.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "services/tokenizer/detokenizer/utf8.h"

namespace ernie::tokenizer {

IncrementalDetokenizer::IncrementalDetokenizer(std::shared_ptr<const DetokenizerTable> table,
                                               bool skip_special_tokens)
    : table_(std::move(table)), skip_special_tokens_(skip_special_tokens) {}

absl::Status IncrementalDetokenizer::Append(absl::Span<const int32_t> ids, std::string* delta) {
  const int32_t size = table_->size();
  for (int32_t id : ids) {
    if (id < 0 || id >= size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary (ids 0..", size - 1, ")"));
    }
    if (table_->entry(id).kind == DecodeKind::kAbsent) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " has no token in this vocabulary"));
    }
  }
  for (int32_t id : ids) AppendOne(table_->entry(id), delta);
  return absl::OkStatus();
}

void IncrementalDetokenizer::AppendOne(const PieceDecoding& entry, std::string* delta) {
  if (entry.special && skip_special_tokens_) return;  // removed before decoding, as HF does
  if (entry.kind == DecodeKind::kByte) {
    at_run_start_ = false;  // a byte run always produces visible text
    pending_[pending_size_++] = static_cast<char>(entry.byte);
    DrainPending(/*at_end=*/false, delta);
    return;
  }
  if (pending_size_ > 0) DrainPending(/*at_end=*/true, delta);  // any other piece ends the byte run
  switch (entry.kind) {
    case DecodeKind::kText: {
      std::string_view text = table_->text(entry);
      bool consumed_space = false;
      if (at_run_start_ && entry.starts_with_space_marker && table_->strips_leading_space()) {
        text.remove_prefix(1);  // the " " that "▁" became
        consumed_space = !table_->strips_all_leading_spaces();
      }
      if (at_run_start_ && (!text.empty() || consumed_space)) at_run_start_ = false;
      delta->append(text);
      return;
    }
    case DecodeKind::kAdded:
      delta->append(table_->text(entry));
      at_run_start_ = true;
      return;
    case DecodeKind::kControl:
    case DecodeKind::kByte:
    case DecodeKind::kAbsent:
      return;
  }
}

void IncrementalDetokenizer::DrainPending(bool at_end, std::string* delta) {
  int consumed = 0;
  while (consumed < pending_size_) {
    const std::string_view rest(pending_ + consumed, static_cast<size_t>(pending_size_ - consumed));
    const int claimed = Utf8SequenceLength(static_cast<unsigned char>(rest[0]));
    if (claimed > static_cast<int>(rest.size()) && !at_end && CouldCompleteUtf8Char(rest)) {
      break;  // wait for the rest of it
    }
    const size_t length = ValidUtf8CharLength(rest);
    if (length == 0) {
      delta->append(kReplacementCharacter);
      consumed += 1;
    } else {
      delta->append(rest.substr(0, length));
      consumed += static_cast<int>(length);
    }
  }
  if (consumed > 0) {
    std::memmove(pending_, pending_ + consumed, static_cast<size_t>(pending_size_ - consumed));
    pending_size_ -= consumed;
  }
}

void IncrementalDetokenizer::Finish(std::string* delta) {
  if (pending_size_ > 0) DrainPending(/*at_end=*/true, delta);
}

}  // namespace ernie::tokenizer
