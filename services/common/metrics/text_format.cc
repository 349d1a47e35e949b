#include "services/common/metrics/text_format.h"

#include <charconv>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace ernie::metrics {

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Counts stay exact and readable up to 2^53.
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0)
    return absl::StrCat(static_cast<int64_t>(value));
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

namespace {
bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
}  // namespace

bool IsValidMetricName(std::string_view name) {
  if (name.empty() || !(IsLetter(name[0]) || name[0] == ':')) return false;
  for (char c : name)
    if (!(IsLetter(c) || IsDigit(c) || c == ':')) return false;
  return true;
}

bool IsValidLabelName(std::string_view name) {
  if (name.empty() || !IsLetter(name[0]) || name.substr(0, 2) == "__") return false;
  for (char c : name)
    if (!(IsLetter(c) || IsDigit(c))) return false;
  return true;
}

}  // namespace ernie::metrics
