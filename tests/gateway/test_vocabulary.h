// A hand-made vocabulary for the gateway tests (no sentencepiece):
//   0 <unk>  1 <s> (control)  2 </s> (control, special)  3 "▁Hello"
//   4 "▁world"  5 "!"  6 <0xE4>  7 <0xBD>  8 <0xA0> (6 7 8 = "你")
//   9 "lo"  10 "▁wo"  11 "rld"  12 <|end_of_sentence|> (added, special)
//   13 "Hel"  14 "\n"
#pragma once

#include <memory>

#include "services/tokenizer/detokenizer/detokenizer_table.h"
#include "services/tokenizer/detokenizer/vocabulary.h"

namespace ernie::gateway::testing {

inline tokenizer::Vocabulary TestVocabulary() {
  using tokenizer::PieceType;
  tokenizer::Vocabulary vocabulary;
  vocabulary.pieces = {{"<unk>", PieceType::kUnknown, false, false},
                       {"<s>", PieceType::kControl, false, false},
                       {"</s>", PieceType::kControl, true, false},
                       {"\xE2\x96\x81Hello", PieceType::kNormal, false, false},
                       {"\xE2\x96\x81world", PieceType::kNormal, false, false},
                       {"!", PieceType::kNormal, false, false},
                       {"<0xE4>", PieceType::kByte, false, false},
                       {"<0xBD>", PieceType::kByte, false, false},
                       {"<0xA0>", PieceType::kByte, false, false},
                       {"lo", PieceType::kNormal, false, false},
                       {"\xE2\x96\x81wo", PieceType::kNormal, false, false},
                       {"rld", PieceType::kNormal, false, false},
                       {"<|end_of_sentence|>", PieceType::kUserDefined, true, true},
                       {"Hel", PieceType::kNormal, false, false},
                       {"\n", PieceType::kNormal, false, false}};
  vocabulary.bos_id = 1;
  vocabulary.add_dummy_prefix = true;
  return vocabulary;
}

inline std::shared_ptr<const tokenizer::DetokenizerTable> TestTable() {
  return *tokenizer::DetokenizerTable::Create(TestVocabulary());
}

}  // namespace ernie::gateway::testing
