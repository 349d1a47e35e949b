// The detokenizer on a hand-made vocabulary (no sentencepiece): the
// leading-space rule at the start and after an added token, control pieces
// inside the leading window, unknown pieces, and the vocabulary hash.
#include <gtest/gtest.h>

#include "services/tokenizer/detokenizer/incremental_detokenizer.h"
#include "services/tokenizer/detokenizer/sha256.h"

namespace ernie::tokenizer {
namespace {

// ids: 0 <unk>, 1 <s> (control), 2 "▁hi", 3 "▁", 4 "x", 5 <0x41>, 6 <|sep|> (added, special), 7 gap
Vocabulary SmallVocabulary(bool add_dummy_prefix, bool remove_extra_whitespaces) {
  Vocabulary vocabulary;
  vocabulary.pieces = {{"<unk>", PieceType::kUnknown, false, false},
                       {"<s>", PieceType::kControl, false, false},
                       {"\xE2\x96\x81hi", PieceType::kNormal, false, false},
                       {"\xE2\x96\x81", PieceType::kNormal, false, false},
                       {"x", PieceType::kNormal, false, false},
                       {"<0x41>", PieceType::kByte, false, false},
                       {"<|sep|>", PieceType::kUserDefined, true, true},
                       {"", PieceType::kUnused, false, false}};
  vocabulary.bos_id = 1;
  vocabulary.add_dummy_prefix = add_dummy_prefix;
  vocabulary.remove_extra_whitespaces = remove_extra_whitespaces;
  return vocabulary;
}

std::string DecodeWith(const Vocabulary& vocabulary, const std::vector<int32_t>& ids, bool skip = false) {
  auto table = DetokenizerTable::Create(vocabulary);
  EXPECT_TRUE(table.ok());
  auto text = (*table)->Decode(ids, skip);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "<error>";
}

TEST(DetokenizerSmallVocabularyTest, LeadingSpaceRules) {
  const Vocabulary off = SmallVocabulary(false, false);
  const Vocabulary prefix = SmallVocabulary(true, false);
  const Vocabulary remove = SmallVocabulary(true, true);
  EXPECT_EQ(DecodeWith(off, {2, 2}), " hi hi");
  EXPECT_EQ(DecodeWith(prefix, {2, 2}), "hi hi");
  EXPECT_EQ(DecodeWith(prefix, {1, 2}), "hi");       // control pieces keep the window open
  EXPECT_EQ(DecodeWith(prefix, {3, 2}), " hi");      // only one "▁" is dropped
  EXPECT_EQ(DecodeWith(remove, {3, 3, 2}), "hi");    // every leading one is
  EXPECT_EQ(DecodeWith(prefix, {5, 2}), "A hi");     // a byte closes the window
  EXPECT_EQ(DecodeWith(prefix, {0, 2}), " \xE2\x81\x87  hi");  // so does <unk> (" ⁇ ")
  EXPECT_EQ(DecodeWith(prefix, {4, 6, 2}), "x<|sep|>hi");      // an added token opens a new run
  EXPECT_EQ(DecodeWith(prefix, {4, 6, 2}, /*skip=*/true), "x hi");  // skipped: one run
}

TEST(DetokenizerSmallVocabularyTest, RejectsBadBytePiecesAndGaps) {
  Vocabulary bad = SmallVocabulary(false, false);
  bad.pieces[5].piece = "<0xZZ>";
  EXPECT_EQ(DetokenizerTable::Create(bad).status().code(), absl::StatusCode::kInvalidArgument);
  auto table = DetokenizerTable::Create(SmallVocabulary(false, false));
  ASSERT_TRUE(table.ok());
  EXPECT_EQ((*table)->Decode({7}, false).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*table)->Decode({8}, false).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DetokenizerSmallVocabularyTest, HashIdentifiesTheVocabulary) {
  const Vocabulary a = SmallVocabulary(false, false);
  Vocabulary b = a;
  EXPECT_EQ(VocabularyHash(a), VocabularyHash(b));
  b.pieces[4].special = true;
  EXPECT_NE(VocabularyHash(a), VocabularyHash(b));
  EXPECT_NE(VocabularyHash(a), VocabularyHash(SmallVocabulary(true, false)));
}

TEST(Sha256Test, KnownDigests) {
  auto hex = [](std::string_view text) {
    Sha256 sha;
    sha.Update(text);
    auto digest = sha.Finish();
    return HexString(digest.data(), digest.size());
  };
  EXPECT_EQ(hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(std::string(1000, 'a')), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

}  // namespace
}  // namespace ernie::tokenizer
