// Per-id decoding precomputed from a Vocabulary, so the incremental
// detokenizer does one table lookup and one append per token.
//
// Decoding rules (sentencepiece 0.1.97's DecodeIds inside a run, Hugging
// Face's slow-tokenizer grouping around added tokens):
//   - normal, user-defined and unused pieces decode to their spelling with
//     "▁" turned into " "; unknown pieces to " ⁇ "; control pieces to "";
//     byte pieces to raw bytes, gathered until the run of byte pieces ends
//     and then read as UTF-8, each invalid byte becoming U+FFFD;
//   - the leading-space rule: while nothing visible has been produced in the
//     current run (control pieces produce nothing), the first "▁" of a piece
//     is dropped when add_dummy_prefix or remove_extra_whitespaces is set;
//     with remove_extra_whitespaces every such leading "▁" is dropped;
//   - an added token decodes to its content verbatim and starts a new run
//     (so the leading-space rule applies again after it);
//   - with skip_special_tokens, special ids are removed before any of this.
//
// Immutable after Create; share one table among any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "services/tokenizer/detokenizer/vocabulary.h"

namespace ernie::tokenizer {

enum class DecodeKind : uint8_t {
  kAbsent,   // no token has this id: decoding it is an error
  kText,     // fixed text, subject to the leading-space rule
  kByte,     // one raw byte, buffered until a UTF-8 character completes
  kControl,  // produces nothing and does not end the leading-space window
  kAdded,    // added token: content verbatim, then a new run
};

struct PieceDecoding {
  uint32_t text_offset = 0;  // into DetokenizerTable::text_arena()
  uint32_t text_length = 0;
  DecodeKind kind = DecodeKind::kAbsent;
  uint8_t byte = 0;                   // kByte: the byte value
  bool special = false;               // dropped by skip_special_tokens
  bool starts_with_space_marker = false;  // kText: the spelling began with "▁"
};

class DetokenizerTable {
 public:
  // Fails on a byte piece that is not spelled "<0xHH>".
  static absl::StatusOr<std::shared_ptr<const DetokenizerTable>> Create(const Vocabulary& vocabulary);

  int32_t size() const { return static_cast<int32_t>(entries_.size()); }
  const PieceDecoding& entry(int32_t id) const { return entries_[static_cast<size_t>(id)]; }
  std::string_view text(const PieceDecoding& entry) const {
    return std::string_view(text_arena_).substr(entry.text_offset, entry.text_length);
  }
  // Whether a leading "▁" may be dropped at the start of a run, and whether
  // every one is (remove_extra_whitespaces) rather than only the first.
  bool strips_leading_space() const { return strips_leading_space_; }
  bool strips_all_leading_spaces() const { return strips_all_leading_spaces_; }

  // The full decode of `ids` (what an IncrementalDetokenizer fed all of them
  // and then finished produces). InvalidArgument for an id out of range or
  // without a token, naming the id.
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const;

 private:
  DetokenizerTable() = default;

  std::vector<PieceDecoding> entries_;  // indexed by id
  std::string text_arena_;              // every kText/kAdded entry's bytes, back to back
  bool strips_leading_space_ = false;
  bool strips_all_leading_spaces_ = false;
};

}  // namespace ernie::tokenizer
