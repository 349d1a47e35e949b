#include "tools/make_model/sentencepiece_model_proto.h"

#include <gtest/gtest.h>

#include "tools/make_model/ernie_special_tokens.h"
#include "tools/make_model/tokenizer_maker.h"

namespace ernie::make_model {
namespace {

TEST(SentencePieceModelProtoTest, HandBuiltEncodingRoundTrips) {
  EditableModelProto proto;
  proto.pieces = {{"<unk>", 0.0f, PieceType::kUnknown}, {"▁hi", -1.5f, PieceType::kNormal},
                  {"<0x41>", 0.0f, PieceType::kByte}};
  proto.other_fields = std::string("\x12\x02\x08\x01", 4);  // field 2 (trainer_spec) {1: 1}
  const std::string bytes = SerializeModelProto(proto);
  const auto parsed = ParseModelProto(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->pieces.size(), 3u);
  EXPECT_EQ(parsed->pieces[1].piece, "▁hi");
  EXPECT_EQ(parsed->pieces[1].score, -1.5f);
  EXPECT_EQ(parsed->pieces[1].type, PieceType::kNormal);
  EXPECT_EQ(parsed->pieces[2].type, PieceType::kByte);
  EXPECT_EQ(parsed->other_fields, proto.other_fields);
  EXPECT_EQ(SerializeModelProto(*parsed), bytes);
}

TEST(SentencePieceModelProtoTest, RejectsTruncatedInput) {
  EditableModelProto proto;
  proto.pieces = {{"<unk>", 0.0f, PieceType::kUnknown}};
  std::string bytes = SerializeModelProto(proto);
  bytes.pop_back();
  const auto parsed = ParseModelProto(bytes);
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("at byte"), std::string::npos);
}

TEST(TokenizerMakerTest, BuildsTheErnieLayoutDeterministically) {
  const TokenizerOptions options{.corpus_dir = ERNIE_MAKE_MODEL_CORPUS_DIR};
  const auto first = MakeTokenizerModel(options);
  ASSERT_TRUE(first.ok()) << first.status();
  const auto second = MakeTokenizerModel(options);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);

  const auto proto = ParseModelProto(*first);
  ASSERT_TRUE(proto.ok());
  const auto& pieces = proto->pieces;
  ASSERT_EQ(pieces.size(), static_cast<size_t>(kSentencePieceVocabSize));
  EXPECT_EQ(pieces[kFirstNormalPieceId].type, PieceType::kNormal);
  EXPECT_EQ(pieces[kEndOfSentenceId - 1].type, PieceType::kUnused);
  EXPECT_EQ(pieces[kEndOfSentenceId].piece, "<|end_of_sentence|>");
  EXPECT_EQ(pieces[kEndOfSentenceId].type, PieceType::kControl);
  EXPECT_EQ(pieces[kBeginOfSentenceId].piece, "<|begin_of_sentence|>");
  EXPECT_EQ(pieces[kFirstMaskId + 7].piece, "<mask:7>");
  EXPECT_EQ(pieces.back().piece, "<mask:20>");
}

TEST(TokenizerMakerTest, MissingCorpusIsNotFound) {
  const auto made = MakeTokenizerModel({.corpus_dir = "/nonexistent/corpus"});
  EXPECT_EQ(made.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(made.status().message().find("/nonexistent/corpus"), std::string::npos);
}

}  // namespace
}  // namespace ernie::make_model
