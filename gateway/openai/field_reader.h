// Typed reads of a request's JSON fields that remember the first problem as
// an ApiError naming the field, so a parser reads every field straight
// through and checks error() once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gateway/openai/api_error.h"
#include "nlohmann/json.hpp"

namespace ernie::gateway {

using Json = nlohmann::ordered_json;

// Deeper nesting of arrays and objects in a request body is refused (400).
inline constexpr int kMaxJsonNesting = 128;

// Parses a request body that must be one JSON object, nested at most
// kMaxJsonNesting levels.
std::optional<ApiError> ParseJsonObject(const std::string& body, Json* out);

class FieldReader {
 public:
  explicit FieldReader(const Json& object) : object_(object) {}

  // Each returns nullopt when the field is absent or null, and when it is
  // malformed (then error() says why). Ranges are inclusive.
  std::optional<double> Number(const char* name, double min, double max);
  std::optional<int64_t> Integer(const char* name, int64_t min, int64_t max);
  std::optional<bool> Bool(const char* name);
  std::optional<std::string> String(const char* name);
  // A string or an array of strings.
  std::optional<std::vector<std::string>> StringOrStringList(const char* name);
  std::optional<std::vector<int32_t>> IntegerList(const char* name, int64_t min, int64_t max);
  const Json* Object(const char* name);  // present, non-null and an object
  const Json* Get(const char* name) const;  // present and non-null

  void Fail(ApiError error) {
    if (!error_) error_ = std::move(error);
  }
  void Fail(std::string param, std::string message) { Fail(BadField(std::move(param), std::move(message))); }
  const std::optional<ApiError>& error() const { return error_; }

 private:
  const Json& object_;
  std::optional<ApiError> error_;  // the first problem found
};

// "a string", "an integer", ... for messages about a value of the wrong type.
std::string JsonTypeName(const Json& value);

}  // namespace ernie::gateway
