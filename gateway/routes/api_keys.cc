#include "gateway/routes/api_keys.h"

#include "absl/strings/ascii.h"

namespace ernie::gateway {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Every byte of the longer string is visited whatever the content.
  const size_t length = a.size() > b.size() ? a.size() : b.size();
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < length; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    difference |= static_cast<unsigned char>(x ^ y);
  }
  return difference == 0;
}

bool ApiKeys::Allows(std::string_view authorization) const {
  if (keys_.empty()) return true;
  constexpr std::string_view kBearer = "bearer ";
  if (authorization.size() < kBearer.size()) return false;
  for (size_t i = 0; i < kBearer.size(); ++i) {
    if (absl::ascii_tolower(static_cast<unsigned char>(authorization[i])) != kBearer[i]) return false;
  }
  std::string_view presented = authorization.substr(kBearer.size());
  while (!presented.empty() && absl::ascii_isspace(static_cast<unsigned char>(presented.front()))) presented.remove_prefix(1);
  while (!presented.empty() && absl::ascii_isspace(static_cast<unsigned char>(presented.back()))) presented.remove_suffix(1);
  bool allowed = false;
  for (const std::string& key : keys_) allowed |= ConstantTimeEquals(presented, key);  // no early exit
  return allowed;
}

}  // namespace ernie::gateway
