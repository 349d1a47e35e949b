// The incremental detokenizer over the demo vocabulary: at every prefix of
// real encodings (Chinese, English, emoji, code; byte-fallback runs
// included), fed 1, 2 and 3 ids at a time, what it emitted plus Finish
// equals the full decode, and no delta holds part of a UTF-8 character.
#include "services/tokenizer/detokenizer/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include "services/tokenizer/detokenizer/utf8.h"
#include "services/tokenizer/tokenizer.h"
#include "tests/services/tokenizer/demo_model.h"

namespace ernie::tokenizer {
namespace {

class IncrementalDetokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = Tokenizer::Load(testing::DemoModelDir());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = std::move(loaded).value().release();
  }
  static void TearDownTestSuite() { delete tokenizer_; }
  static Tokenizer* tokenizer_;
};
Tokenizer* IncrementalDetokenizerTest::tokenizer_ = nullptr;

std::vector<int32_t> Ids(const Tokenizer& tokenizer, const std::string& text) {
  auto encoded = tokenizer.Encode(text, {.parse_special_tokens = true});
  EXPECT_TRUE(encoded.ok()) << encoded.status();
  return encoded.ok() ? encoded->ids : std::vector<int32_t>{};
}

void ExpectStreamsLikeFullDecode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip) {
  for (size_t step : {1, 2, 3}) {
    IncrementalDetokenizer detokenizer(tokenizer.detokenizer_table(), skip);
    std::string emitted;
    for (size_t begin = 0; begin < ids.size(); begin += step) {
      const size_t count = std::min(step, ids.size() - begin);
      std::string delta;
      ASSERT_TRUE(detokenizer.Append(absl::MakeConstSpan(ids).subspan(begin, count), &delta).ok());
      EXPECT_EQ(FindInvalidUtf8(delta), std::string_view::npos) << "delta splits a character at id " << begin;
      emitted += delta;
      // The prefix so far, decoded in full, is what was emitted plus the tail.
      const std::vector<int32_t> prefix(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(begin + count));
      auto full = tokenizer.Decode(prefix, skip);
      ASSERT_TRUE(full.ok());
      IncrementalDetokenizer finished = detokenizer;
      std::string tail;
      finished.Finish(&tail);
      ASSERT_EQ(emitted + tail, *full) << "step " << step << " prefix " << prefix.size();
    }
  }
}

TEST_F(IncrementalDetokenizerTest, EveryPrefixMatchesTheFullDecode) {
  const std::vector<std::string> texts = {
      "Hello, world! This is English text.",
      "中文English混合，深度学习模型。",
      "emoji 😀👍🏽🇨🇳 mixed 漢字 and ✓",
      "def f(x):\n\treturn {\"k\": [1, 2, 3]}  # comment\n",
      "<|begin_of_sentence|>User: 你好\nAssistant: 很高兴见到你<|end_of_sentence|></s>",
      "  spaces   everywhere  ",
  };
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = Ids(*tokenizer_, text);
    SCOPED_TRACE(text);
    for (bool skip : {false, true}) ExpectStreamsLikeFullDecode(*tokenizer_, ids, skip);
  }
}

TEST_F(IncrementalDetokenizerTest, EveryPrefixOfRandomBytesAndSpecialsMatchesTheFullDecode) {
  // Mostly byte pieces biased to UTF-8 lead/continuation bytes, with specials
  // and ordinary pieces between: valid, cut-off, overlong and surrogate runs.
  uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u, state >> 8; };
  for (int list = 0; list < 200; ++list) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 16; ++i) {
      const uint32_t pick = next() % 8;
      if (pick < 3) {
        ids.push_back(13 + 0x80 + static_cast<int32_t>(next() % 64));  // continuation
      } else if (pick < 5) {
        static const int kLeads[] = {0xC2, 0xC0, 0xE0, 0xE4, 0xED, 0xF0, 0xF4, 0xF5, 0xFF, 0x41};
        ids.push_back(13 + kLeads[next() % 10]);
      } else if (pick < 6) {
        static const int32_t kSpecials[] = {2, 100272, 100274, 100300};
        ids.push_back(kSpecials[next() % 4]);
      } else {
        ids.push_back(269 + static_cast<int32_t>(next() % 7000));
      }
    }
    for (bool skip : {false, true}) ExpectStreamsLikeFullDecode(*tokenizer_, ids, skip);
  }
}

TEST_F(IncrementalDetokenizerTest, HoldsBackByteFallbackUntilTheCharacterCompletes) {
  // 中 = E4 B8 AD as three byte pieces.
  IncrementalDetokenizer detokenizer(tokenizer_->detokenizer_table(), false);
  std::string delta;
  ASSERT_TRUE(detokenizer.Append({13 + 0xE4}, &delta).ok());
  EXPECT_EQ(delta, "");
  ASSERT_TRUE(detokenizer.Append({13 + 0xB8}, &delta).ok());
  EXPECT_EQ(delta, "");
  EXPECT_EQ(detokenizer.pending_bytes(), 2);
  ASSERT_TRUE(detokenizer.Append({13 + 0xAD}, &delta).ok());
  EXPECT_EQ(delta, "中");
  // An invalid sequence: E4 then 'A' as a byte: each bad byte is U+FFFD.
  delta.clear();
  ASSERT_TRUE(detokenizer.Append({13 + 0xE4, 13 + 0x41}, &delta).ok());
  EXPECT_EQ(delta, "\xEF\xBF\xBD" "A");
  // A non-byte piece ends the run: a cut-off character becomes U+FFFD.
  delta.clear();
  ASSERT_TRUE(detokenizer.Append({13 + 0xE4, 13 + 0xB8}, &delta).ok());
  EXPECT_EQ(delta, "");
  ASSERT_TRUE(detokenizer.Append({100272}, &delta).ok());
  EXPECT_EQ(delta, "\xEF\xBF\xBD\xEF\xBF\xBD<|end_of_sentence|>");
}

TEST_F(IncrementalDetokenizerTest, SkippedSpecialTokensDoNotSplitAByteRun) {
  IncrementalDetokenizer detokenizer(tokenizer_->detokenizer_table(), /*skip_special_tokens=*/true);
  std::string delta;
  ASSERT_TRUE(detokenizer.Append({13 + 0xE4, 2, 13 + 0xB8, 100272, 13 + 0xAD}, &delta).ok());
  EXPECT_EQ(delta, "中");
}

TEST_F(IncrementalDetokenizerTest, RejectsIdsOutsideTheVocabularyAndConsumesNothing) {
  IncrementalDetokenizer detokenizer(tokenizer_->detokenizer_table(), false);
  std::string delta;
  const absl::Status status = detokenizer.Append({13 + 0xE4, 200000}, &delta);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("200000"), std::string_view::npos);
  EXPECT_EQ(detokenizer.pending_bytes(), 0);
  EXPECT_EQ(detokenizer.Append({101304}, &delta).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ernie::tokenizer
