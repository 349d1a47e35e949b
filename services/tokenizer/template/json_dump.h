// Python's json.dumps, as Hugging Face's tojson filter calls it
// (ensure_ascii=False by default, Python's separators and indent rules),
// reproduced byte for byte.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "services/tokenizer/template/value.h"

namespace ernie::chat_template {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  // Python's indent: nullopt-like when !has_indent; an int n means n spaces.
  bool has_indent = false;
  std::string indent;
  // Python's defaults: (", ", ": ") without indent, (",", ": ") with it.
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// Fails (like Python's TypeError) on values JSON cannot hold: Undefined,
// callables, namespaces.
absl::StatusOr<std::string> DumpJson(const Value& value, const JsonDumpOptions& options);

}  // namespace ernie::chat_template
