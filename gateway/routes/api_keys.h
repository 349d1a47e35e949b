// API key check: "Authorization: Bearer <key>" against the configured keys,
// compared in constant time so response timing reveals nothing of a key.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ernie::gateway {

class ApiKeys {
 public:
  explicit ApiKeys(std::vector<std::string> keys) : keys_(std::move(keys)) {}

  bool enabled() const { return !keys_.empty(); }
  // True when no keys are configured or `authorization` (the header's
  // value) is "Bearer K" for a configured K.
  bool Allows(std::string_view authorization) const;

 private:
  std::vector<std::string> keys_;
};

// Equal strings, in time that depends only on the lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace ernie::gateway
