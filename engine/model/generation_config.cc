#include "engine/model/generation_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ernie {

absl::StatusOr<GenerationDefaults> ParseGenerationDefaults(const std::string& text, const std::string& file) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(absl::StrCat(file, ": not a JSON object"));
  GenerationDefaults g;
  auto bad = [&](const char* key, const char* want) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": '", key, "' must be ", want));
  };
  auto number = [&](const char* key, std::optional<float>* out) -> absl::Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_number()) return bad(key, "a number");
    *out = it->get<float>();
    return absl::OkStatus();
  };
  for (auto [key, out] : {std::pair{"temperature", &g.temperature}, std::pair{"top_p", &g.top_p},
                          std::pair{"repetition_penalty", &g.repetition_penalty},
                          std::pair{"presence_penalty", &g.presence_penalty},
                          std::pair{"frequency_penalty", &g.frequency_penalty}}) {
    if (auto s = number(key, out); !s.ok()) return s;
  }
  if (auto it = j.find("do_sample"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("do_sample", "true or false");
    g.do_sample = it->get<bool>();
  }
  for (auto [key, out] : {std::pair{"top_k", &g.top_k}, std::pair{"max_new_tokens", &g.max_new_tokens}}) {
    if (auto it = j.find(key); it != j.end() && !it->is_null()) {
      if (!it->is_number_integer()) return bad(key, "an integer");
      *out = it->get<int>();
    }
  }
  if (auto it = j.find("eos_token_id"); it != j.end() && !it->is_null()) {
    if (it->is_number_integer()) {
      g.eos_token_ids.push_back(it->get<int64_t>());
    } else if (it->is_array()) {
      for (const auto& e : *it) {
        if (!e.is_number_integer()) return bad("eos_token_id", "an integer or a list of integers");
        g.eos_token_ids.push_back(e.get<int64_t>());
      }
    } else {
      return bad("eos_token_id", "an integer or a list of integers");
    }
  }
  return g;
}

absl::StatusOr<GenerationDefaults> LoadGenerationDefaults(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "generation_config.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return GenerationDefaults{};
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseGenerationDefaults(ss.str(), path);
}

}  // namespace ernie
