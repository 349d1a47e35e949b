// Stop strings over streamed text: holdback of possible prefixes, matches
// split across many deltas, overlapping candidates, multibyte characters,
// and the same through the detokenizer (ChoiceDecoder).
#include "gateway/stream/stop_string_matcher.h"

#include <gtest/gtest.h>

#include "gateway/stream/choice_decoder.h"
#include "tests/gateway/test_vocabulary.h"

namespace ernie::gateway {
namespace {

// Pushes each delta and returns what was shown, '|' between pushes.
std::string Feed(StopStringMatcher& matcher, const std::vector<std::string>& deltas) {
  std::string out;
  for (const std::string& delta : deltas) out += matcher.Push(delta) + "|";
  return out;
}

TEST(StopStringMatcherTest, NoStopStringsPassesEverythingThrough) {
  StopStringMatcher matcher({});
  EXPECT_EQ(Feed(matcher, {"ab", "c"}), "ab|c|");
  EXPECT_EQ(matcher.Flush(), "");
  EXPECT_FALSE(matcher.matched());
}

TEST(StopStringMatcherTest, HoldsBackAPossiblePrefixUntilDecided) {
  StopStringMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.Push("abcST"), "abc");
  EXPECT_EQ(matcher.held_bytes(), 2u);
  EXPECT_EQ(matcher.Push("x"), "STx");  // not a stop after all
  EXPECT_FALSE(matcher.matched());
}

TEST(StopStringMatcherTest, MatchSplitAcrossManyDeltasTruncates) {
  StopStringMatcher matcher({"STOP"});
  EXPECT_EQ(Feed(matcher, {"one S", "T", "O", "P two"}), "one ||||");
  EXPECT_TRUE(matcher.matched());
  EXPECT_EQ(matcher.matched_stop(), "STOP");
  EXPECT_EQ(matcher.Push("more"), "");
  EXPECT_EQ(matcher.Flush(), "");
}

TEST(StopStringMatcherTest, OverlappingPrefixesKeepTheLongestPossibleHold) {
  // "aab" must be found although "aa" first looks like a failed "ab".
  StopStringMatcher matcher({"aab"});
  EXPECT_EQ(matcher.Push("xa"), "x");
  EXPECT_EQ(matcher.Push("a"), "");  // "aa" may still start "aab"
  EXPECT_EQ(matcher.Push("a"), "a");  // "aaa": the first 'a' can no longer start it
  EXPECT_EQ(matcher.Push("b!"), "");
  EXPECT_TRUE(matcher.matched());
}

TEST(StopStringMatcherTest, EarliestOfSeveralStopStringsWins) {
  StopStringMatcher matcher({"world", "lo w"});
  EXPECT_EQ(matcher.Push("hello world"), "hel");
  EXPECT_EQ(matcher.matched_stop(), "lo w");
}

TEST(StopStringMatcherTest, MultibyteStopStringAndTextCutOnCharacterBoundaries) {
  const std::string ni = "\xE4\xBD\xA0";   // 你
  const std::string hao = "\xE5\xA5\xBD";  // 好
  StopStringMatcher matcher({ni + hao});
  EXPECT_EQ(matcher.Push("a" + ni), "a");  // 你 may start 你好
  EXPECT_EQ(matcher.Push(ni), ni);         // 你你: the first one is free
  EXPECT_EQ(matcher.Push(hao + "b"), "");
  EXPECT_TRUE(matcher.matched());
}

TEST(StopStringMatcherTest, FlushReleasesHeldText) {
  StopStringMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.Push("abST"), "ab");
  EXPECT_EQ(matcher.Flush(), "ST");
}

TEST(ChoiceDecoderTest, StopStringSplitAcrossTokens) {
  // "▁Hello" "▁wo" "rld" = "Hello world"; stop "lo wor" spans three tokens.
  ChoiceDecoder decoder(testing::TestTable(), true, {"lo wor"});
  std::string shown;
  for (int32_t id : {3, 10, 11, 5}) {
    auto delta = decoder.Append({id});
    ASSERT_TRUE(delta.ok());
    shown += *delta;
  }
  EXPECT_TRUE(decoder.stopped_by_string());
  EXPECT_EQ(shown, "Hel");
  EXPECT_EQ(decoder.text(), "Hel");
  EXPECT_EQ(decoder.Finish(), "");
}

TEST(ChoiceDecoderTest, MultibyteCharacterFromBytePiecesIsNeverSplit) {
  ChoiceDecoder decoder(testing::TestTable(), true, {});
  auto a = decoder.Append({3, 6});
  auto b = decoder.Append({7});
  auto c = decoder.Append({8, 5});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, "Hello");
  EXPECT_EQ(*b, "");
  EXPECT_EQ(*c, "\xE4\xBD\xA0!");
}

TEST(ChoiceDecoderTest, SkipsSpecialTokensAndIdsPastTheVocabulary) {
  ChoiceDecoder decoder(testing::TestTable(), true, {});
  auto text = decoder.Append({3, 12, 2});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "Hello");
  // A model with more embedding rows than tokens may sample the extra rows: no text, no failure.
  auto more = decoder.Append({999, 5, -1});
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(*more, "!");
  EXPECT_EQ(decoder.text(), "Hello!");
}

TEST(ChoiceDecoderTest, HeldBackPrefixIsReleasedAtTheEnd) {
  ChoiceDecoder decoder(testing::TestTable(), true, {"Hello!"});
  auto text = decoder.Append({3});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "");
  EXPECT_EQ(decoder.Finish(), "Hello");
  EXPECT_FALSE(decoder.stopped_by_string());
}

}  // namespace
}  // namespace ernie::gateway
