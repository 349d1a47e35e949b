// UTF-8 helpers and the Python str methods that chat templates call
// (strip, split, title, ...), working on code points as Python does.
// Case mapping covers ASCII only; other letters are left unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ernie::chat_template {

// Debian's abseil has its own absl::string_view, which absl::StrCat takes
// but std::string_view does not convert to; Cat forwards views to StrCat.
namespace cat_detail {
inline absl::string_view Piece(std::string_view s) { return absl::string_view(s.data(), s.size()); }
inline absl::string_view Piece(const std::string& s) { return s; }
inline absl::string_view Piece(absl::string_view s) { return s; }
inline absl::string_view Piece(const char* s) { return s; }
template <typename T>
  requires std::is_arithmetic_v<T>
T Piece(T v) {
  return v;
}
}  // namespace cat_detail

template <typename... Args>
std::string Cat(const Args&... args) {
  return absl::StrCat(cat_detail::Piece(args)...);
}

// Malformed bytes decode as U+FFFD each (input JSON is valid UTF-8).
std::vector<uint32_t> DecodeUtf8(std::string_view s);
void AppendUtf8(std::string& out, uint32_t cp);
std::string EncodeUtf8(const std::vector<uint32_t>& cps);
size_t CodePointCount(std::string_view s);

// Python str.isspace() for one code point.
bool IsPythonSpace(uint32_t cp);

enum class StripSide { kBoth, kLeft, kRight };
// str.strip / lstrip / rstrip; `chars` nullopt strips whitespace.
std::string PythonStrip(std::string_view s, const std::optional<std::string>& chars, StripSide side);
// str.split(sep, maxsplit); nullopt sep splits on runs of whitespace.
std::vector<std::string> PythonSplit(std::string_view s, const std::optional<std::string>& sep,
                                     int64_t maxsplit);
// str.splitlines() (without keepends).
std::vector<std::string> PythonSplitLines(std::string_view s);
std::string PythonUpper(std::string_view s);
std::string PythonLower(std::string_view s);
// str.title(): a letter after a non-letter is upper-cased, others lowered.
std::string PythonTitle(std::string_view s);
// str.capitalize(): first character upper, the rest lower.
std::string PythonCapitalize(std::string_view s);
// str.replace(old, new, count); count < 0 replaces all.
std::string PythonReplace(std::string_view s, std::string_view old_text, std::string_view new_text,
                          int64_t count);

}  // namespace ernie::chat_template
