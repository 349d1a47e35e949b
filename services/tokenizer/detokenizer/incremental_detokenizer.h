// Streaming detokenization: ids in, UTF-8-safe text deltas out.
//
// Invariant: the concatenation of every delta Append has produced, plus what
// Finish would produce now, equals DetokenizerTable::Decode of all ids fed so
// far. Deltas only ever hold whole UTF-8 characters: byte-fallback pieces
// are held back until their character completes (or is known invalid, when
// it becomes U+FFFD as sentencepiece writes it).
//
// One object per stream; not thread-safe. Copyable (a copy continues the
// stream independently). The common path allocates nothing beyond growing
// the caller's output string.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "services/tokenizer/detokenizer/detokenizer_table.h"

namespace ernie::tokenizer {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(std::shared_ptr<const DetokenizerTable> table, bool skip_special_tokens);

  // Appends to `*delta` the text that `ids` complete. Validates every id
  // first: on an id out of range or without a token it returns
  // InvalidArgument naming the id and consumes none of `ids`.
  absl::Status Append(absl::Span<const int32_t> ids, std::string* delta);

  // Appends the held-back bytes as the end of the stream renders them (each
  // incomplete character's bytes as U+FFFD). The stream may continue after,
  // as if a new byte run began.
  void Finish(std::string* delta);

  // Bytes of an unfinished UTF-8 character waiting for more byte pieces.
  int pending_bytes() const { return pending_size_; }

 private:
  void AppendOne(const PieceDecoding& entry, std::string* delta);
  // Emits every complete character of pending_; `at_end` renders an
  // incomplete tail as U+FFFD too.
  void DrainPending(bool at_end, std::string* delta);

  std::shared_ptr<const DetokenizerTable> table_;  // shared, immutable
  bool skip_special_tokens_;
  bool at_run_start_ = true;  // sentencepiece's is_bos_ws: nothing visible yet in this run
  char pending_[4] = {};      // bytes of an incomplete character (byte fallback)
  int pending_size_ = 0;
};

}  // namespace ernie::tokenizer
