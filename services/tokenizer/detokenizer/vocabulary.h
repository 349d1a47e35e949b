// The vocabulary a tokenizer hands out (GetVocabulary): every id's piece,
// its sentencepiece type and how decoding treats it. The gateway rebuilds
// the incremental detokenizer from exactly this, without sentencepiece.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ernie::tokenizer {

// Sentencepiece's piece types, numbered as ernie.v1.VocabularyPiece.Type.
enum class PieceType : uint8_t {
  kNormal = 0,
  kUnknown = 1,
  kControl = 2,
  kUserDefined = 3,
  kByte = 4,  // "<0xHH>": one raw byte (byte fallback)
  kUnused = 5,
};

struct VocabularyPiece {
  // As sentencepiece spells it ("▁the", "<0x0A>"), or an added token's
  // content. Empty marks an id with no token (a gap among the added-token
  // ids); decoding it is an error. Real pieces are never empty.
  std::string piece;
  PieceType type = PieceType::kNormal;
  bool special = false;  // dropped by skip_special_tokens
  // An added token (tokenizer_config.json's added_tokens_decoder): decodes
  // to its content verbatim and ends the sentencepiece run before it, as
  // Hugging Face's slow tokenizers decode added tokens.
  bool added = false;
};

struct Vocabulary {
  std::vector<VocabularyPiece> pieces;  // indexed by token id
  int32_t bos_id = -1;                  // -1 when the model has none
  // Sentencepiece's normalizer flags; they drive the leading-space rule.
  bool add_dummy_prefix = false;
  bool remove_extra_whitespaces = false;
};

// Identifies a vocabulary: lowercase hex SHA-256 of a canonical byte string
// (for each piece in id order: its length as 4 little-endian bytes, its
// bytes, then one byte each of type, special, added; then bos_id as 4
// little-endian bytes and one byte each of add_dummy_prefix and
// remove_extra_whitespaces). Equal hashes mean identical decoding.
std::string VocabularyHash(const Vocabulary& vocabulary);

}  // namespace ernie::tokenizer
