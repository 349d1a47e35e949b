#include "services/tokenizer/detokenizer/vocabulary.h"

#include "services/tokenizer/detokenizer/sha256.h"

namespace ernie::tokenizer {
namespace {

void AppendLittleEndian32(uint32_t value, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

}  // namespace

std::string VocabularyHash(const Vocabulary& vocabulary) {
  Sha256 sha;
  std::string record;
  for (const VocabularyPiece& piece : vocabulary.pieces) {
    record.clear();
    AppendLittleEndian32(static_cast<uint32_t>(piece.piece.size()), &record);
    record += piece.piece;
    record.push_back(static_cast<char>(piece.type));
    record.push_back(piece.special ? 1 : 0);
    record.push_back(piece.added ? 1 : 0);
    sha.Update(record);
  }
  record.clear();
  AppendLittleEndian32(static_cast<uint32_t>(vocabulary.bos_id), &record);
  record.push_back(vocabulary.add_dummy_prefix ? 1 : 0);
  record.push_back(vocabulary.remove_extra_whitespaces ? 1 : 0);
  sha.Update(record);
  const std::array<uint8_t, 32> digest = sha.Finish();
  return HexString(digest.data(), digest.size());
}

}  // namespace ernie::tokenizer
