// The tokenizer over ernie-make-model's demo files: ERNIE-4.5's ids and
// special tokens, special-token parsing, skip_special_tokens, errors.
#include "services/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include "tests/services/tokenizer/demo_model.h"

namespace ernie::tokenizer {
namespace {

class TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = Tokenizer::Load(testing::DemoModelDir());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = std::move(loaded).value().release();
  }
  static void TearDownTestSuite() { delete tokenizer_; }
  static Tokenizer* tokenizer_;
};
Tokenizer* TokenizerTest::tokenizer_ = nullptr;

TEST_F(TokenizerTest, HasErnieIdsAndSpecialTokens) {
  const Tokenizer& t = *tokenizer_;
  EXPECT_EQ(t.sentencepiece_size(), 100295);
  EXPECT_EQ(t.vocab_size(), 101309);  // added tokens up to <|VIDEO_END|> 101308
  EXPECT_EQ(t.IdToPiece(0), "<unk>");
  EXPECT_EQ(t.IdToPiece(1), "<s>");
  EXPECT_EQ(t.IdToPiece(2), "</s>");
  EXPECT_EQ(t.IdToPiece(3), "0");
  EXPECT_EQ(t.IdToPiece(13), "<0x00>");
  EXPECT_EQ(t.IdToPiece(268), "<0xFF>");
  EXPECT_EQ(t.TokenToId("<|end_of_sentence|>"), 100272);
  EXPECT_EQ(t.TokenToId("<|begin_of_sentence|>"), 100273);
  EXPECT_EQ(t.TokenToId("<|IMAGE_PLACEHOLDER|>"), 100295);
  EXPECT_EQ(t.TokenToId("<|LOC_0|>"), 100297);
  EXPECT_EQ(t.SpecialToken("bos_token"), "<s>");
  EXPECT_EQ(t.SpecialToken("eos_token"), "</s>");
  EXPECT_EQ(t.SpecialToken("cls_token"), "<|begin_of_sentence|>");
  EXPECT_EQ(t.SpecialToken("sep_token"), "<|end_of_sentence|>");
  EXPECT_EQ(t.eos_token_ids(), (std::vector<int32_t>{2, 100272}));
  EXPECT_EQ(t.model_max_length(), 131072);
  EXPECT_TRUE(t.has_chat_template());
  EXPECT_EQ(t.template_names(), std::vector<std::string>{"default"});
  EXPECT_EQ(t.vocabulary().pieces[101304].piece, "");  // the unassigned id
  EXPECT_EQ(t.vocabulary_hash().size(), 64u);
  EXPECT_FALSE(t.vocabulary().add_dummy_prefix);
}

TEST_F(TokenizerTest, ParsesSpecialTokensAsSingleIdsOnlyWhenAsked) {
  const std::string text = "<|begin_of_sentence|>Hi<|end_of_sentence|><|LOC_12|><|IMAGE_PLACEHOLDER|>";
  auto parsed = tokenizer_->Encode(text, {.parse_special_tokens = true, .return_offsets = true});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_GE(parsed->ids.size(), 5u);
  EXPECT_EQ(parsed->ids.front(), 100273);
  EXPECT_EQ(parsed->ids[parsed->ids.size() - 3], 100272);
  EXPECT_EQ(parsed->ids[parsed->ids.size() - 2], 100297 + 12);
  EXPECT_EQ(parsed->ids.back(), 100295);
  ASSERT_EQ(parsed->offsets.size(), parsed->ids.size());
  EXPECT_EQ(parsed->offsets.front(), std::make_pair(0, 21));
  EXPECT_EQ(parsed->offsets.back(), std::make_pair(static_cast<int32_t>(text.size()) - 21,
                                                    static_cast<int32_t>(text.size())));
  auto plain = tokenizer_->Encode(text, {});
  ASSERT_TRUE(plain.ok());
  for (int32_t id : plain->ids) EXPECT_LT(id, 100272) << "special id without parse_special_tokens";
  auto round_trip = tokenizer_->Decode(plain->ids, /*skip_special_tokens=*/true);
  ASSERT_TRUE(round_trip.ok());
  EXPECT_EQ(*round_trip, text);  // the markers were plain text
}

TEST_F(TokenizerTest, DecodesSpecialTokensToContentOrSkipsThem) {
  auto hi = tokenizer_->Encode("Hi there", {});
  ASSERT_TRUE(hi.ok());
  std::vector<int32_t> ids = {100273};
  ids.insert(ids.end(), hi->ids.begin(), hi->ids.end());
  ids.push_back(100272);
  ids.push_back(100300);  // <|LOC_3|>, past the sentencepiece model
  ids.push_back(2);
  EXPECT_EQ(*tokenizer_->Decode(ids, false), "<|begin_of_sentence|>Hi there<|end_of_sentence|><|LOC_3|></s>");
  EXPECT_EQ(*tokenizer_->Decode(ids, true), "Hi there");
}

TEST_F(TokenizerTest, AddSpecialTokensFollowsTheConfig) {
  // ERNIE's tokenizer_config.json has add_bos_token and add_eos_token false.
  auto with = tokenizer_->Encode("Hello", {.add_special_tokens = true});
  auto without = tokenizer_->Encode("Hello", {});
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_EQ(with->ids, without->ids);
}

TEST_F(TokenizerTest, RejectsInvalidUtf8AndUnknownIds) {
  auto bad_text = tokenizer_->Encode(std::string("ab\xE4\xB8", 4), {});
  EXPECT_EQ(bad_text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_text.status().message().find("UTF-8 (byte offset 2)"), std::string_view::npos)
      << bad_text.status();
  EXPECT_EQ(tokenizer_->Encode(std::string("\xED\xA0\x80", 3), {}).status().code(),
            absl::StatusCode::kInvalidArgument);  // a surrogate
  auto out_of_range = tokenizer_->Decode(std::vector<int32_t>{5, 101309}, false);
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out_of_range.status().message().find("101309"), std::string_view::npos);
  auto negative = tokenizer_->Decode(std::vector<int32_t>{-1}, false);
  EXPECT_NE(negative.status().message().find("-1"), std::string_view::npos);
  auto gap = tokenizer_->Decode(std::vector<int32_t>{101304}, false);
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(gap.status().message().find("101304"), std::string_view::npos);
}

TEST_F(TokenizerTest, AppliesTheErnieChatTemplate) {
  ChatRequest request;
  request.messages = nlohmann::ordered_json::parse(
      R"([{"role": "system", "content": "Sys."}, {"role": "user", "content": "Hi"}])");
  auto prompt = tokenizer_->ApplyChatTemplate(request);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_EQ(*prompt, "<|begin_of_sentence|>Sys.\nUser: Hi\nAssistant: ");
  request.add_generation_prompt = false;
  EXPECT_EQ(*tokenizer_->ApplyChatTemplate(request), "<|begin_of_sentence|>Sys.\nUser: Hi\n");
  request.template_name = "tool_use";
  auto unknown = tokenizer_->ApplyChatTemplate(request);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("unknown chat template 'tool_use'"), std::string_view::npos);
}

TEST(TokenizerLoadTest, MissingDirectoryIsNotFound) {
  auto loaded = Tokenizer::Load("/nonexistent/tokenizer-dir");
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find("tokenizer.model"), std::string_view::npos);
}

}  // namespace
}  // namespace ernie::tokenizer
