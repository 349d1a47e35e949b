// Constructs outside the supported subset, and malformed templates, fail at
// Parse with a message naming the construct and its line and column.
#include <string>

#include "gtest/gtest.h"
#include "services/tokenizer/template/chat_template.h"

namespace ernie::chat_template {
namespace {

std::string ParseError(const std::string& source) {
  absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(source);
  EXPECT_FALSE(parsed.ok()) << "parsed: " << source;
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(parsed.status().message());
}

std::string RenderError(const std::string& source, const nlohmann::ordered_json& context) {
  absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(source);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!parsed.ok()) return "";
  absl::StatusOr<std::string> rendered = parsed->Render(context);
  EXPECT_FALSE(rendered.ok()) << "rendered: " << *rendered;
  return rendered.ok() ? "" : std::string(rendered.status().message());
}

TEST(ChatTemplateErrorTest, IntegersUpTo64BitsStayExact) {
  // What Jinja2 prints for the same expressions (inside 64 bits Python's
  // arbitrary-precision integers agree with ours); a huge exponent of 1 or
  // -1 costs 64 steps, not 10^18.
  absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(
      "{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 1 ** 1000000000000000000 }} {{ (-1) ** 999999999999999999 }} "
      "{{ -9223372036854775807 - 1 }} {{ (-9223372036854775807 - 1) % -1 }} {{ 3037000499 * 3037000499 }}");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<std::string> rendered = parsed->Render(nlohmann::ordered_json::object());
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  EXPECT_EQ(*rendered,
            "4611686018427387904 -9223372036854775808 1 -1 -9223372036854775808 0 9223372030926249001");
}

TEST(ChatTemplateErrorTest, UnsupportedTagsNameTheConstructAndPosition) {
  EXPECT_EQ(ParseError("hello\n  {% include 'x.jinja' %}"),
            "chat template uses an unsupported construct '{% include %}' at line 2, column 3");
  EXPECT_EQ(ParseError("{% extends 'base' %}"),
            "chat template uses an unsupported construct '{% extends %}' at line 1, column 1");
  EXPECT_EQ(ParseError("ab{% filter upper %}x{% endfilter %}"),
            "chat template uses an unsupported construct '{% filter %}' at line 1, column 3");
  EXPECT_EQ(ParseError("{% generation %}x{% endgeneration %}"),
            "chat template uses an unsupported construct '{% generation %}' at line 1, column 1");
  EXPECT_EQ(ParseError("x\n\n{%- raw %}{{ y }}{% endraw %}"),
            "chat template uses an unsupported construct '{% raw %}' at line 3, column 1");
  EXPECT_EQ(ParseError("{% for x in y recursive %}{% endfor %}"),
            "chat template uses an unsupported construct 'recursive for loop' at line 1, column 15");
}

TEST(ChatTemplateErrorTest, UnknownFiltersTestsAndTagsAreErrors) {
  EXPECT_EQ(ParseError("{{ x | frobnicate }}"),
            "chat template uses an unsupported filter 'frobnicate' at line 1, column 8");
  EXPECT_EQ(ParseError("line\n{% if x is prime %}{% endif %}"),
            "chat template uses an unsupported test 'prime' at line 2, column 12");
  EXPECT_EQ(ParseError("{% frob %}"), "chat template syntax error at line 1, column 1: unknown tag '{% frob %}'");
}

TEST(ChatTemplateErrorTest, UnterminatedAndMismatchedBlocks) {
  EXPECT_EQ(ParseError("{% if x %}\nabc"),
            "chat template syntax error at line 1, column 1: unterminated '{% if %}' block: expected "
            "'{% endif %}' before the end of the template");
  EXPECT_EQ(ParseError("{% for m in messages %}{{ m }}"),
            "chat template syntax error at line 1, column 1: unterminated '{% for %}' block: expected "
            "'{% endfor %}' before the end of the template");
  EXPECT_EQ(ParseError("{% if x %}{% endfor %}"),
            "chat template syntax error at line 1, column 11: unexpected '{% endfor %}' with no open block it "
            "closes");
  EXPECT_EQ(ParseError("a {{ x "), "chat template syntax error at line 1, column 3: unexpected end of template: tag "
                                   "opened here is missing '}}'");
  EXPECT_EQ(ParseError("{# never closed"),
            "chat template syntax error at line 1, column 1: unterminated comment: missing '#}'");
  EXPECT_EQ(ParseError("{{ 'abc }}"), "chat template syntax error at line 1, column 4: unterminated string literal");
  EXPECT_EQ(ParseError("{% break %}"), "chat template syntax error at line 1, column 1: 'break' outside a for loop");
}

TEST(ChatTemplateErrorTest, SyntaxErrorsNameWhatWasExpected) {
  EXPECT_EQ(ParseError("{{ x + }}"), "chat template syntax error at line 1, column 8: expected an expression, got '}}'");
  EXPECT_EQ(ParseError("{% for x messages %}{% endfor %}"),
            "chat template syntax error at line 1, column 10: expected 'in', got 'messages'");
  EXPECT_EQ(ParseError("{{ a b }}"), "chat template syntax error at line 1, column 6: expected '}}', got 'b'");
  EXPECT_EQ(ParseError("{{ x ? 1 }}"), "chat template syntax error at line 1, column 6: unexpected character '?'");
  EXPECT_EQ(ParseError("{{ f(*args) }}"),
            "chat template uses an unsupported construct '*args in a call' at line 1, column 6");
}

TEST(ChatTemplateErrorTest, RuntimeErrorsCarryPositionAndMessage) {
  EXPECT_EQ(RenderError("\n  {{ raise_exception('bad role') }}", nlohmann::ordered_json::object()),
            "chat template raised an exception at line 2, column 6: bad role");
  EXPECT_EQ(RenderError("{{ missing.attr }}", nlohmann::ordered_json::object()),
            "chat template error at line 1, column 11: 'missing' is undefined");
  EXPECT_EQ(RenderError("{% set x = 1 %}{% set x.y = 2 %}", nlohmann::ordered_json::object()),
            "chat template error at line 1, column 16: cannot assign attribute on non-namespace object 'x'");
  EXPECT_EQ(RenderError("{{ 1 // 0 }}", nlohmann::ordered_json::object()),
            "chat template error at line 1, column 6: integer division or modulo by zero");
  // Python's integers do not overflow; ours are 64-bit, and a result past
  // them is an error (the fuzzer found `2**81` wrapping, which UBSan reports).
  const auto empty = nlohmann::ordered_json::object();
  EXPECT_EQ(RenderError("{{ 2 ** 81 }}", empty),
            "chat template error at line 1, column 6: integer overflow in '**': chat template integers are 64-bit");
  EXPECT_EQ(RenderError("{{ 9223372036854775807 + 1 }}", empty),
            "chat template error at line 1, column 24: integer overflow in '+': chat template integers are 64-bit");
  EXPECT_EQ(RenderError("{{ -9223372036854775807 - 2 }}", empty),
            "chat template error at line 1, column 25: integer overflow in '-': chat template integers are 64-bit");
  EXPECT_EQ(RenderError("{{ 4294967296 * 4294967296 }}", empty),
            "chat template error at line 1, column 15: integer overflow in '*': chat template integers are 64-bit");
  EXPECT_EQ(RenderError("{{ [9223372036854775807, 1] | sum }}", empty),
            "chat template error at line 1, column 31: filter 'sum': integer overflow in '+': chat template integers "
            "are 64-bit");
  EXPECT_EQ(RenderError("{{ ['a', 'b'] | sum }}", empty),
            "chat template error at line 1, column 17: filter 'sum': can't sum strings, use join");
  EXPECT_EQ(RenderError("{{ [1, none] | sum }}", empty),
            "chat template error at line 1, column 16: filter 'sum': unsupported operand type(s) for +: 'int' and "
            "'NoneType'");
  EXPECT_EQ(RenderError("{{ 'ab' * 10 ** 12 }}", empty),
            "chat template error at line 1, column 9: '*' would repeat 2 elements 1000000000000 times; at most "
            "67108864 elements in all");
  EXPECT_EQ(RenderError("{{ ([1, 2, 3] * 30000000) | length }}", empty),
            "chat template error at line 1, column 15: '*' would repeat 3 elements 30000000 times; at most 67108864 "
            "elements in all");
  EXPECT_EQ(RenderError("{{ [[1]] | map(attribute='99999999999999999999') | list }}", empty),
            "chat template error at line 1, column 12: attribute index '99999999999999999999' is out of range");
  EXPECT_EQ(RenderError("{{ '%s' % 1 }}", nlohmann::ordered_json::object()),
            "chat template error at line 1, column 9: printf-style string formatting ('%') is not supported in chat "
            "templates");
  EXPECT_EQ(RenderError("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", nlohmann::ordered_json::object()),
            "chat template error at line 1, column 19: macro 'm' nested deeper than 64 calls");
}

}  // namespace
}  // namespace ernie::chat_template

namespace ernie::chat_template {
namespace {

// Nesting is bounded (crash inputs of the chat_template fuzz target, in
// tests/fuzz/regressions, overflowed the stack before): deep parentheses,
// operator and filter chains, `not`s and blocks are a parse error naming
// where the limit was passed, while nesting as deep as real templates use
// still parses.
TEST(ChatTemplateErrorTest, NestingDeeperThanTheLimitIsAnError) {
  const auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  EXPECT_EQ(ParseError("{{ " + repeat("(", 300) + "1" + repeat(")", 300) + " }}").rfind(
                "chat template syntax error at line 1, column ", 0),
            0u);
  EXPECT_NE(ParseError("{{ " + repeat("(", 300) + "1" + repeat(")", 300) + " }}").find("nested deeper than 256 levels"),
            std::string::npos);
  EXPECT_NE(ParseError("{{ 1" + repeat("+1", 300) + " }}").find("nested deeper than 256 levels"), std::string::npos);
  EXPECT_NE(ParseError("{{ x" + repeat("|trim", 300) + " }}").find("nested deeper than 256 levels"),
            std::string::npos);
  EXPECT_NE(ParseError("{{ " + repeat("not ", 300) + "x }}").find("nested deeper than 256 levels"),
            std::string::npos);
  EXPECT_NE(ParseError(repeat("{% if x %}", 300) + repeat("{% endif %}", 300)).find("nested deeper than 256"),
            std::string::npos);

  auto fine = ChatTemplate::Parse(repeat("{% if true %}", 20) + "{{ " + repeat("(", 30) + "1" + repeat("+1", 30) +
                                  repeat(")", 30) + " }}" + repeat("{% endif %}", 20));
  ASSERT_TRUE(fine.ok()) << fine.status();
  auto rendered = fine->Render(nlohmann::ordered_json::object());
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  EXPECT_EQ(*rendered, "31");
}

}  // namespace
}  // namespace ernie::chat_template
