#include "gateway/openai/field_reader.h"

#include <cmath>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "services/common/json_nesting.h"

namespace ernie::gateway {

std::optional<ApiError> ParseJsonObject(const std::string& body, Json* out) {
  // nlohmann parses and frees without recursion, but copying, dumping and
  // comparing a value recurse once per level: a body nested a hundred
  // thousand deep (200 KB) overflowed the stack (the openai_request fuzz
  // target's regression inputs). OpenAI's structured outputs allow 5 levels.
  if (JsonNestsDeeperThan(body, kMaxJsonNesting)) {
    return BadField("body", absl::StrCat("the request body nests arrays and objects deeper than ", kMaxJsonNesting,
                                         " levels"));
  }
  Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return BadField("body", "the request body is not valid JSON");
  if (!parsed.is_object()) return BadField("body", "the request body must be a JSON object");
  *out = std::move(parsed);
  return std::nullopt;
}

std::string JsonTypeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    default: return "an unsupported value";
  }
}

const Json* FieldReader::Get(const char* name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> FieldReader::Number(const char* name, double min, double max) {
  const Json* value = Get(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) {
    Fail(name, absl::StrCat("'", name, "' must be a number, got ", JsonTypeName(*value)));
    return std::nullopt;
  }
  const double number = value->get<double>();
  if (!std::isfinite(number) || number < min || number > max) {
    Fail(name, absl::StrCat("'", name, "' must be between ", min, " and ", max, ", got ", number));
    return std::nullopt;
  }
  return number;
}

std::optional<int64_t> FieldReader::Integer(const char* name, int64_t min, int64_t max) {
  const Json* value = Get(name);
  if (value == nullptr) return std::nullopt;
  int64_t number = 0;
  if (value->is_number_integer()) {
    number = value->get<int64_t>();
  } else if (value->is_number_unsigned()) {
    const uint64_t u = value->get<uint64_t>();
    number = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  } else if (value->is_number_float() && std::floor(value->get<double>()) == value->get<double>() &&
             std::abs(value->get<double>()) < 9e15) {
    number = static_cast<int64_t>(value->get<double>());  // 16.0 is accepted as 16, like pydantic
  } else {
    Fail(name, absl::StrCat("'", name, "' must be an integer, got ", JsonTypeName(*value)));
    return std::nullopt;
  }
  if (number < min || number > max) {
    Fail(name, absl::StrCat("'", name, "' must be between ", min, " and ", max, ", got ", number));
    return std::nullopt;
  }
  return number;
}

std::optional<bool> FieldReader::Bool(const char* name) {
  const Json* value = Get(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) {
    Fail(name, absl::StrCat("'", name, "' must be a boolean, got ", JsonTypeName(*value)));
    return std::nullopt;
  }
  return value->get<bool>();
}

std::optional<std::string> FieldReader::String(const char* name) {
  const Json* value = Get(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) {
    Fail(name, absl::StrCat("'", name, "' must be a string, got ", JsonTypeName(*value)));
    return std::nullopt;
  }
  return value->get<std::string>();
}

std::optional<std::vector<std::string>> FieldReader::StringOrStringList(const char* name) {
  const Json* value = Get(name);
  if (value == nullptr) return std::nullopt;
  if (value->is_string()) return std::vector<std::string>{value->get<std::string>()};
  if (!value->is_array()) {
    Fail(name, absl::StrCat("'", name, "' must be a string or an array of strings, got ", JsonTypeName(*value)));
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < value->size(); ++i) {
    const Json& item = (*value)[i];
    if (!item.is_string()) {
      Fail(absl::StrCat(name, "[", i, "]"),
           absl::StrCat("'", name, "[", i, "]' must be a string, got ", JsonTypeName(item)));
      return std::nullopt;
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::optional<std::vector<int32_t>> FieldReader::IntegerList(const char* name, int64_t min, int64_t max) {
  const Json* value = Get(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_array()) {
    Fail(name, absl::StrCat("'", name, "' must be an array of integers, got ", JsonTypeName(*value)));
    return std::nullopt;
  }
  std::vector<int32_t> out;
  for (size_t i = 0; i < value->size(); ++i) {
    const Json& item = (*value)[i];
    if (!item.is_number_integer() && !item.is_number_unsigned()) {
      Fail(absl::StrCat(name, "[", i, "]"),
           absl::StrCat("'", name, "[", i, "]' must be an integer, got ", JsonTypeName(item)));
      return std::nullopt;
    }
    const int64_t number = item.is_number_unsigned() && item.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                               ? INT64_MAX
                               : item.get<int64_t>();
    if (number < min || number > max) {
      Fail(absl::StrCat(name, "[", i, "]"),
           absl::StrCat("'", name, "[", i, "]' must be between ", min, " and ", max, ", got ", number));
      return std::nullopt;
    }
    out.push_back(static_cast<int32_t>(number));
  }
  return out;
}

const Json* FieldReader::Object(const char* name) {
  const Json* value = Get(name);
  if (value == nullptr) return nullptr;
  if (!value->is_object()) {
    Fail(name, absl::StrCat("'", name, "' must be an object, got ", JsonTypeName(*value)));
    return nullptr;
  }
  return value;
}

}  // namespace ernie::gateway
