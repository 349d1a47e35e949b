#include "engine/model/quantization_config.h"

#include <algorithm>
#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/awq_format.h"

namespace ernie {

namespace {

using nlohmann::json;

absl::Status Bad(absl::string_view file, absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": 'quantization_config.", key, "' ", why));
}

// The first of `keys` present (and not null) in `q`, or nullptr.
const json* FindEither(const json& q, std::initializer_list<const char*> keys, std::string* found) {
  for (const char* key : keys) {
    auto it = q.find(key);
    if (it != q.end() && !it->is_null()) {
      *found = key;
      return &*it;
    }
  }
  return nullptr;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

bool AwqConfig::Quantizes(absl::string_view module) const {
  for (const std::string& skip : modules_to_not_convert)
    if (!skip.empty() && module.find(skip) != absl::string_view::npos) return false;
  return true;
}

absl::StatusOr<std::optional<AwqConfig>> ParseQuantizationConfig(const json& config, absl::string_view file) {
  auto it = config.find("quantization_config");
  if (it == config.end() || it->is_null()) return std::optional<AwqConfig>();
  if (!it->is_object()) return absl::InvalidArgumentError(absl::StrCat(file, ": 'quantization_config' must be an object"));
  const json& q = *it;
  std::string key;

  const json* method = FindEither(q, {"quant_method"}, &key);
  if (method == nullptr) return Bad(file, "quant_method", "is missing (\"awq\" is supported)");
  if (!method->is_string() || Lower(method->get<std::string>()) != "awq")
    return Bad(file, "quant_method", absl::StrCat(method->dump(), " is not supported (only \"awq\")"));

  if (const json* bits = FindEither(q, {"bits", "w_bit"}, &key)) {
    if (!bits->is_number_integer() || bits->get<int64_t>() != 4)
      return Bad(file, key, absl::StrCat(bits->dump(), " is not supported (AWQ weights must be 4-bit)"));
  } else {
    return Bad(file, "bits", "is missing (must be 4)");
  }

  AwqConfig awq;
  if (const json* group = FindEither(q, {"group_size", "q_group_size"}, &key)) {
    if (!group->is_number_integer() ||
        std::find(kAwqGroupSizes.begin(), kAwqGroupSizes.end(), group->get<int64_t>()) == kAwqGroupSizes.end())
      return Bad(file, key, absl::StrCat(group->dump(), " is not supported (group sizes ",
                                         absl::StrJoin(kAwqGroupSizes, ", "), " are)"));
    awq.group_size = group->get<int64_t>();
  } else {
    return Bad(file, "group_size", "is missing");
  }

  if (const json* zero = FindEither(q, {"zero_point"}, &key)) {
    if (!zero->is_boolean()) return Bad(file, key, "must be true or false");
    if (!zero->get<bool>())
      return Bad(file, key, "false is not supported (symmetric AWQ without zero points is not read; true is)");
  }
  if (const json* version = FindEither(q, {"version"}, &key)) {
    if (!version->is_string() || Lower(version->get<std::string>()) != "gemm")
      return Bad(file, key, absl::StrCat(version->dump(), " is not supported (only \"gemm\", AutoAWQ's default packing)"));
  }
  if (const json* skip = FindEither(q, {"modules_to_not_convert"}, &key)) {
    if (!skip->is_array()) return Bad(file, key, "must be a list of module names");
    for (const json& s : *skip) {
      if (!s.is_string()) return Bad(file, key, "must be a list of module names");
      awq.modules_to_not_convert.push_back(s.get<std::string>());
    }
  }
  return std::optional<AwqConfig>(awq);
}

json AwqQuantizationConfigJson(const AwqConfig& awq) {
  json q = json::object();
  q["quant_method"] = "awq";
  q["bits"] = 4;
  q["group_size"] = awq.group_size;
  q["zero_point"] = true;
  q["version"] = "gemm";
  q["modules_to_not_convert"] = awq.modules_to_not_convert.empty() ? json(nullptr) : json(awq.modules_to_not_convert);
  return q;
}

}  // namespace ernie
