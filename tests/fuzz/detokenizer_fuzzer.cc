// Fuzz target: the incremental detokenizer (services/tokenizer/detokenizer)
// on random ids, fed in random chunks. Beyond not crashing it checks the
// header's invariant: the deltas plus Finish equal the table's one-shot
// Decode of every accepted id, each delta is whole UTF-8 characters, and a
// chunk with a bad id is refused whole.
//
// Input: one flags byte (bit 0 skip_special_tokens, bit 1 add_dummy_prefix,
// bit 2 remove_extra_whitespaces), then records of one chunk-length byte
// (0-7 ids) followed by that many 2-byte little-endian ids. The vocabulary
// below has every piece type, all 256 byte pieces and a gap, and ids past
// its end are drawn too.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "services/tokenizer/detokenizer/detokenizer_table.h"
#include "services/tokenizer/detokenizer/incremental_detokenizer.h"
#include "services/tokenizer/detokenizer/utf8.h"

namespace {

using namespace ernie::tokenizer;

// ids 0-7 named pieces (7 is a gap), 8-263 the bytes <0x00>-<0xFF>, then a
// few multi-byte and "▁"-led pieces; 272 ids in all.
Vocabulary FuzzVocabulary(bool add_dummy_prefix, bool remove_extra_whitespaces) {
  Vocabulary v;
  v.pieces = {{"<unk>", PieceType::kUnknown, false, false},
              {"<s>", PieceType::kControl, false, false},
              {"</s>", PieceType::kControl, true, false},
              {"\xE2\x96\x81hi", PieceType::kNormal, false, false},
              {"\xE2\x96\x81", PieceType::kNormal, false, false},
              {"<|sep|>", PieceType::kUserDefined, true, true},
              {"<mask:1>", PieceType::kUserDefined, false, true},
              {"", PieceType::kUnused, false, false}};
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    v.pieces.push_back({std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", PieceType::kByte, false, false});
  }
  for (const char* piece : {"\xE2\x96\x81\xE2\x96\x81x", "\xE4\xBD\xA0", "\xF0\x9F\x8C\x8D", "a\xE2\x96\x81" "b",
                            "<unused>", "\n", "\xE2\x96\x81world", "!"}) {
    v.pieces.push_back({piece, std::string_view(piece) == "<unused>" ? PieceType::kUnused : PieceType::kNormal,
                        false, false});
  }
  v.bos_id = 1;
  v.add_dummy_prefix = add_dummy_prefix;
  v.remove_extra_whitespaces = remove_extra_whitespaces;
  return v;
}

std::shared_ptr<const DetokenizerTable> TableFor(int variant) {
  static std::shared_ptr<const DetokenizerTable> tables[4];
  if (!tables[variant]) {
    auto table = DetokenizerTable::Create(FuzzVocabulary(variant & 1, variant & 2));
    ERNIE_FUZZ_CHECK(table.ok(), "the fuzz vocabulary is valid");
    tables[variant] = *table;
  }
  return tables[variant];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool skip_special = data[0] & 1;
  auto table = TableFor((data[0] >> 1) & 3);
  IncrementalDetokenizer detokenizer(table, skip_special);
  std::vector<int32_t> accepted;
  std::string text;
  size_t at = 1;
  while (at < size) {
    const size_t count = data[at++] & 7;
    std::vector<int32_t> chunk;
    for (size_t i = 0; i < count && at + 1 < size; ++i, at += 2) {
      // Ids up to 1023: about a quarter past the vocabulary's end.
      chunk.push_back(static_cast<int32_t>((data[at] | data[at + 1] << 8) & 1023));
    }
    std::string delta;
    const int pending_before = detokenizer.pending_bytes();
    const absl::Status status = detokenizer.Append(chunk, &delta);
    if (!status.ok()) {
      ERNIE_FUZZ_CHECK(delta.empty() && detokenizer.pending_bytes() == pending_before, "a bad chunk is refused whole");
      continue;
    }
    ERNIE_FUZZ_CHECK(FindInvalidUtf8(delta) == std::string::npos, "deltas are valid UTF-8");
    text += delta;
    accepted.insert(accepted.end(), chunk.begin(), chunk.end());
  }
  std::string tail;
  detokenizer.Finish(&tail);
  ERNIE_FUZZ_CHECK(detokenizer.pending_bytes() == 0, "Finish drains");
  text += tail;
  auto whole = table->Decode(accepted, skip_special);
  ERNIE_FUZZ_CHECK(whole.ok(), "accepted ids decode");
  ERNIE_FUZZ_CHECK(*whole == text, "deltas + Finish == Decode");
  return 0;
}
