// A scan that bounds how deep JSON text nests, before anything parses it.
// nlohmann parses and frees without recursion, but copying, dumping,
// comparing or converting a value (the gateway's request handling, the chat
// template's Value::FromJson) recurse once per level, so a body nested a
// hundred thousand deep overflows a thread's stack. The gateway and the
// tokenizer both check their JSON inputs with it; header-only, no library.
#pragma once

#include <cstddef>
#include <string_view>

namespace ernie {

// Whether arrays and objects in `text` nest deeper than `limit` (brackets
// inside strings do not count). One pass over the bytes.
inline bool JsonNestsDeeperThan(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, which may be a quote
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace ernie
