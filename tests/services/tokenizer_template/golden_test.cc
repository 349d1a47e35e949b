// Every real chat template x every message-list case, rendered by our
// renderer and compared byte for byte with what Jinja2 3.1.2 (configured as
// transformers configures it) rendered into expected.json.
#include <map>

#include "gtest/gtest.h"
#include "services/tokenizer/template/chat_template.h"
#include "tests/services/tokenizer_template/test_data.h"

namespace ernie::chat_template {
namespace {

using nlohmann::ordered_json;
using testing::ReadJsonFixture;
using testing::ReadTemplate;

// Builds the context the way the tokenizer service does, from the case.
ChatContextInput InputFor(const ordered_json& case_json, const ordered_json& special_tokens,
                          const ordered_json& template_kwargs) {
  ChatContextInput input;
  input.messages = case_json.at("messages");
  input.add_generation_prompt = case_json.at("add_generation_prompt").get<bool>();
  if (case_json.contains("tools")) input.tools = case_json.at("tools");
  for (const auto& [key, value] : special_tokens.items()) {
    if (key == "bos_token") {
      input.bos_token = value.get<std::string>();
    } else if (key == "eos_token") {
      input.eos_token = value.get<std::string>();
    } else {
      input.other_special_tokens[key] = value;
    }
  }
  input.extra_kwargs = template_kwargs;
  if (case_json.contains("kwargs")) {
    for (const auto& [key, value] : case_json.at("kwargs").items()) input.extra_kwargs[key] = value;
  }
  return input;
}

TEST(ChatTemplateGoldenTest, RealTemplatesMatchJinja2ByteForByte) {
  const ordered_json cases = ReadJsonFixture("cases.json");
  const ordered_json special = ReadJsonFixture("special_tokens.json");
  const ordered_json expected = ReadJsonFixture("expected.json");
  std::map<std::string, ordered_json> cases_by_name;
  for (const ordered_json& c : cases.at("cases")) cases_by_name[c.at("name").get<std::string>()] = c;

  std::map<std::string, ChatTemplate> templates;
  for (const ordered_json& name : cases.at("templates")) {
    absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(ReadTemplate(name.get<std::string>()));
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status();
    templates.emplace(name.get<std::string>(), *std::move(parsed));
  }

  size_t outputs_checked = 0;
  size_t errors_checked = 0;
  for (const ordered_json& result : expected.at("template_cases")) {
    const std::string template_name = result.at("template").get<std::string>();
    const std::string case_name = result.at("case").get<std::string>();
    SCOPED_TRACE(template_name + " / " + case_name);
    ASSERT_TRUE(cases_by_name.count(case_name)) << "expected.json is stale: rerun render_expected.py";
    const ordered_json kwargs = cases.at("template_kwargs").value(template_name, ordered_json::object());
    absl::StatusOr<ordered_json> context =
        BuildChatContext(InputFor(cases_by_name.at(case_name), special.at(template_name), kwargs));
    ASSERT_TRUE(context.ok()) << context.status();
    // The same variables, in the same order, as apply_chat_template passes.
    EXPECT_EQ(context->dump(), result.at("context").dump());

    absl::StatusOr<std::string> rendered = templates.at(template_name).Render(*context);
    if (result.contains("output")) {
      ASSERT_TRUE(rendered.ok()) << rendered.status();
      EXPECT_EQ(*rendered, result.at("output").get<std::string>());
      ++outputs_checked;
    } else {
      ASSERT_FALSE(rendered.ok()) << "Jinja2 failed with: " << result.at("error") << "\nwe rendered: " << *rendered;
      if (result.at("error_type") == "TemplateError") {
        // raise_exception(...): the template's own message reaches the caller.
        EXPECT_NE(rendered.status().message().find(result.at("error").get<std::string>()), std::string::npos)
            << rendered.status();
      }
      ++errors_checked;
    }
  }
  // Every template, and enough cases to mean something.
  EXPECT_GE(outputs_checked, 60u);
  EXPECT_GE(errors_checked, 10u);
}

}  // namespace
}  // namespace ernie::chat_template
