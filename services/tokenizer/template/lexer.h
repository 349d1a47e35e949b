// Splits a template into text and tag tokens the way Jinja2's lexer does
// with Hugging Face's settings: trim_blocks, lstrip_blocks, `-`/`+`
// whitespace control, \r\n normalised to \n, one trailing newline dropped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "services/tokenizer/template/value.h"

namespace ernie::chat_template {

enum class TokenType {
  kText,           // literal output between tags
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,   // text holds the unescaped value
  kInteger,  // int_value
  kFloat,    // float_value
  kOperator,
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0.0;
  SourcePos pos;
};

// Errors name the line and column of the offending character.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source);

// "line 3, column 7" for error messages.
std::string DescribePos(SourcePos pos);

}  // namespace ernie::chat_template
