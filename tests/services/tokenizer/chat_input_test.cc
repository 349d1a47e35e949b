// ParseChatInput: ChatInput's JSON strings -> ChatRequest, and the errors
// that name the field (not JSON, wrong type, nested too deep).
#include "services/tokenizer/chat_input.h"

#include <gtest/gtest.h>

#include <string>

namespace ernie::tokenizer {
namespace {

// `depth` arrays, one inside the other, around a single message object
// (which is one more level): [[{"role":"user","content":"hi"}]] is depth 2.
std::string NestedMessages(int depth) {
  return std::string(depth, '[') + R"({"role":"user","content":"hi"})" + std::string(depth, ']');
}

TEST(ChatInputTest, ParsesEveryField) {
  ernie::v1::ChatInput input;
  input.set_messages_json(R"([{"role":"user","content":"hi"}])");
  input.set_tools_json(R"([{"type":"function","function":{"name":"f"}}])");
  input.set_chat_template_kwargs_json(R"({"enable_thinking":false})");
  input.set_add_generation_prompt(true);
  input.set_template_name("tool_use");
  absl::StatusOr<ChatRequest> request = ParseChatInput(input);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->messages.size(), 1u);
  EXPECT_EQ(request->messages[0]["content"], "hi");
  ASSERT_TRUE(request->tools.has_value());
  EXPECT_EQ(request->tools->size(), 1u);
  EXPECT_EQ(request->kwargs["enable_thinking"], false);
  EXPECT_TRUE(request->add_generation_prompt);
  EXPECT_EQ(request->template_name, "tool_use");
}

TEST(ChatInputTest, NestingAtTheLimitIsAccepted) {
  ernie::v1::ChatInput input;
  input.set_messages_json(NestedMessages(kMaxChatJsonNesting - 1));  // + the message object = the limit
  EXPECT_TRUE(ParseChatInput(input).ok());
}

TEST(ChatInputTest, DeeperNestingIsAnErrorNamingTheField) {
  ernie::v1::ChatInput input;
  input.set_messages_json(NestedMessages(kMaxChatJsonNesting));
  absl::StatusOr<ChatRequest> request = ParseChatInput(input);
  ASSERT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(request.status().message(), "chat.messages_json nests arrays and objects deeper than 128 levels");
}

// 500,000 levels in 1 MB (the service's default --max-input-bytes): before
// the limit, the template's recursive JSON -> Value conversion overflowed the
// stack on input like this. Now it is refused before it is parsed.
TEST(ChatInputTest, HalfAMillionLevelsAreRefusedNotParsed) {
  ernie::v1::ChatInput input;
  input.set_messages_json("[]");
  input.set_tools_json(std::string(500'000, '[') + std::string(500'000, ']'));
  absl::StatusOr<ChatRequest> request = ParseChatInput(input);
  ASSERT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(request.status().message().find("chat.tools_json nests"), std::string::npos);

  input.clear_tools_json();
  input.set_chat_template_kwargs_json(std::string(500'000, '{'));  // not even valid JSON: the depth is checked first
  request = ParseChatInput(input);
  ASSERT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(request.status().message().find("chat.chat_template_kwargs_json nests"), std::string::npos);
}

// Brackets inside strings, escaped quotes included, are text, not nesting.
TEST(ChatInputTest, BracketsInStringsDoNotCount) {
  ernie::v1::ChatInput input;
  const std::string brackets(1000, '[');
  input.set_messages_json(R"([{"role":"user","content":"\")" + brackets + R"("}])");
  absl::StatusOr<ChatRequest> request = ParseChatInput(input);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->messages[0]["content"], "\"" + brackets);
}

}  // namespace
}  // namespace ernie::tokenizer
