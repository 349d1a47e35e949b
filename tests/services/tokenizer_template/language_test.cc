// The language itself (whitespace control, literals, filters, tests, loops,
// macros, namespaces, slicing, Undefined): small templates from
// language_cases.json compared with Jinja2's output in expected.json.
#include "gtest/gtest.h"
#include "services/tokenizer/template/chat_template.h"
#include "tests/services/tokenizer_template/test_data.h"

namespace ernie::chat_template {
namespace {

using nlohmann::ordered_json;

TEST(ChatTemplateLanguageTest, SmallTemplatesMatchJinja2) {
  const ordered_json cases = testing::ReadJsonFixture("language_cases.json");
  const ordered_json expected = testing::ReadJsonFixture("expected.json").at("language_cases");
  ASSERT_EQ(cases.size(), expected.size()) << "expected.json is stale: rerun render_expected.py";
  for (size_t i = 0; i < cases.size(); ++i) {
    const ordered_json& c = cases[i];
    const ordered_json& want = expected[i];
    SCOPED_TRACE(c.at("name").get<std::string>() + ": " + c.at("template").get<std::string>());
    ASSERT_EQ(c.at("name"), want.at("name"));
    absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(c.at("template").get<std::string>());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    absl::StatusOr<std::string> rendered = parsed->Render(c.at("context"));
    if (want.contains("output")) {
      ASSERT_TRUE(rendered.ok()) << rendered.status();
      EXPECT_EQ(*rendered, want.at("output").get<std::string>());
    } else {
      ASSERT_FALSE(rendered.ok()) << "Jinja2 failed with: " << want.at("error") << "\nwe rendered: " << *rendered;
      // Our messages follow Python's for these errors.
      EXPECT_NE(rendered.status().message().find(want.at("error").get<std::string>()), std::string::npos)
          << rendered.status();
    }
  }
}

TEST(ChatTemplateLanguageTest, PlainJsonContextSortsKeysButRendersTheSame) {
  absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse("{{ messages[0].content }}|{{ x|tojson }}");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const nlohmann::json context = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"x", {{"b", 1}, {"a", 2}}}};
  absl::StatusOr<std::string> rendered = parsed->Render(context);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  EXPECT_EQ(*rendered, "hi|{\"a\": 2, \"b\": 1}");
}

TEST(ChatTemplateLanguageTest, ContextMustBeAnObject) {
  absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse("x");
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(parsed->Render(nlohmann::ordered_json::array()).ok());
}

TEST(ChatTemplateLanguageTest, BuildChatContextRejectsBadInput) {
  ChatContextInput input;
  input.messages = nlohmann::ordered_json::object();
  EXPECT_FALSE(BuildChatContext(input).ok());
  input.messages = nlohmann::ordered_json::array();
  input.extra_kwargs = {{"messages", 1}};
  absl::StatusOr<nlohmann::ordered_json> context = BuildChatContext(input);
  ASSERT_FALSE(context.ok());
  EXPECT_NE(context.status().message().find("messages"), std::string::npos);
}

}  // namespace
}  // namespace ernie::chat_template
