// Builds the syntax tree from tokens, following Jinja2's grammar and
// operator precedence. Constructs outside the supported subset (include,
// extends, filter blocks, unknown filters or tests, ...) are errors that
// name the construct and its line and column.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "services/tokenizer/template/ast.h"

namespace ernie::chat_template {

absl::StatusOr<Body> ParseTemplate(std::string_view source);

}  // namespace ernie::chat_template
