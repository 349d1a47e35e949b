#include "services/tokenizer/detokenizer/detokenizer_table.h"

#include "absl/strings/str_cat.h"
#include "services/tokenizer/detokenizer/incremental_detokenizer.h"

namespace ernie::tokenizer {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";     // "▁"
constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";  // sentencepiece's " ⁇ "

// "<0xE4>" -> 0xE4.
absl::StatusOr<uint8_t> ParseBytePiece(std::string_view piece, size_t id) {
  auto hex_value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (piece.size() == 6 && piece.substr(0, 3) == "<0x" && piece[5] == '>') {
    const int high = hex_value(piece[3]);
    const int low = hex_value(piece[4]);
    if (high >= 0 && low >= 0) return static_cast<uint8_t>(high * 16 + low);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("vocabulary: byte piece ", id, " is spelled '", std::string(piece), "', not <0xHH>"));
}

// "▁" -> " " everywhere, as sentencepiece renders a piece.
std::string ReplaceSpaceMarkers(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  size_t position = 0;
  while (position < piece.size()) {
    if (piece.substr(position, kSpaceMarker.size()) == kSpaceMarker) {
      out.push_back(' ');
      position += kSpaceMarker.size();
    } else {
      out.push_back(piece[position++]);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const DetokenizerTable>> DetokenizerTable::Create(const Vocabulary& vocabulary) {
  std::shared_ptr<DetokenizerTable> table(new DetokenizerTable());
  table->strips_leading_space_ = vocabulary.add_dummy_prefix || vocabulary.remove_extra_whitespaces;
  table->strips_all_leading_spaces_ = vocabulary.remove_extra_whitespaces;
  table->entries_.resize(vocabulary.pieces.size());
  auto add_text = [&](PieceDecoding& entry, std::string_view text) {
    entry.text_offset = static_cast<uint32_t>(table->text_arena_.size());
    entry.text_length = static_cast<uint32_t>(text.size());
    table->text_arena_.append(text);
  };
  for (size_t id = 0; id < vocabulary.pieces.size(); ++id) {
    const VocabularyPiece& piece = vocabulary.pieces[id];
    PieceDecoding& entry = table->entries_[id];
    entry.special = piece.special;
    if (piece.piece.empty()) {
      entry.kind = DecodeKind::kAbsent;
    } else if (piece.added) {
      entry.kind = DecodeKind::kAdded;
      add_text(entry, piece.piece);
    } else if (piece.type == PieceType::kControl) {
      entry.kind = DecodeKind::kControl;
    } else if (piece.type == PieceType::kByte) {
      entry.kind = DecodeKind::kByte;
      auto byte = ParseBytePiece(piece.piece, id);
      if (!byte.ok()) return byte.status();
      entry.byte = *byte;
    } else if (piece.type == PieceType::kUnknown) {
      entry.kind = DecodeKind::kText;
      add_text(entry, kUnknownSurface);
    } else {
      entry.kind = DecodeKind::kText;
      entry.starts_with_space_marker = std::string_view(piece.piece).substr(0, kSpaceMarker.size()) == kSpaceMarker;
      add_text(entry, ReplaceSpaceMarkers(piece.piece));
    }
  }
  return std::shared_ptr<const DetokenizerTable>(std::move(table));
}

absl::StatusOr<std::string> DetokenizerTable::Decode(const std::vector<int32_t>& ids,
                                                     bool skip_special_tokens) const {
  // Only called with a shared_ptr-owned table; the aliasing constructor
  // gives the detokenizer a non-owning pointer to this.
  IncrementalDetokenizer detokenizer(std::shared_ptr<const DetokenizerTable>(std::shared_ptr<void>(), this),
                                     skip_special_tokens);
  std::string text;
  absl::Status status = detokenizer.Append(ids, &text);
  if (!status.ok()) return status;
  detokenizer.Finish(&text);
  return text;
}

}  // namespace ernie::tokenizer
