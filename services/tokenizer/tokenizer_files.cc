#include "services/tokenizer/tokenizer_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace ernie::tokenizer {
namespace {

using Json = nlohmann::json;

constexpr const char* kSpecialTokenNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                              "pad_token", "cls_token", "mask_token"};

absl::StatusOr<std::optional<std::string>> ReadOptionalFile(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::optional<std::string>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return std::optional<std::string>(buffer.str());
}

absl::StatusOr<std::optional<Json>> ReadOptionalJson(const std::filesystem::path& path) {
  ERNIE_ASSIGN_OR_RETURN(std::optional<std::string> text, ReadOptionalFile(path));
  if (!text.has_value()) return std::optional<Json>();
  Json json = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not valid JSON"));
  if (!json.is_object()) return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not a JSON object"));
  return std::optional<Json>(std::move(json));
}

// A special token is written as a string or as an AddedToken object
// {"content": ..., "__type": "AddedToken"}.
absl::StatusOr<std::optional<std::string>> TokenContent(const Json& value, const std::string& where) {
  if (value.is_null()) return std::optional<std::string>();
  if (value.is_string()) return std::optional<std::string>(value.get<std::string>());
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return std::optional<std::string>(value["content"].get<std::string>());
  }
  return absl::InvalidArgumentError(absl::StrCat(where, ": expected a token string or {\"content\": ...}"));
}

absl::Status ReadSpecialTokens(const Json& json, const std::string& file, TokenizerFiles* files) {
  for (const char* name : kSpecialTokenNames) {
    if (!json.contains(name)) continue;
    ERNIE_ASSIGN_OR_RETURN(std::optional<std::string> content, TokenContent(json[name], absl::StrCat(file, " ", name)));
    auto it = std::find_if(files->named_special_tokens.begin(), files->named_special_tokens.end(),
                           [&](const auto& entry) { return entry.first == name; });
    if (!content.has_value()) {
      if (it != files->named_special_tokens.end()) files->named_special_tokens.erase(it);
    } else if (it != files->named_special_tokens.end()) {
      it->second = *content;
    } else {
      files->named_special_tokens.emplace_back(name, *content);
    }
  }
  // Keep the fixed order whatever order the files used.
  std::stable_sort(files->named_special_tokens.begin(), files->named_special_tokens.end(),
                   [](const auto& a, const auto& b) {
                     auto rank = [](const std::string& name) {
                       return std::find_if(std::begin(kSpecialTokenNames), std::end(kSpecialTokenNames),
                                           [&](const char* n) { return name == n; }) -
                              std::begin(kSpecialTokenNames);
                     };
                     return rank(a.first) < rank(b.first);
                   });
  if (json.contains("additional_special_tokens")) {
    const Json& list = json["additional_special_tokens"];
    if (!list.is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": additional_special_tokens must be an array"));
    }
    files->additional_special_tokens.clear();
    for (size_t i = 0; i < list.size(); ++i) {
      ERNIE_ASSIGN_OR_RETURN(std::optional<std::string> content,
                             TokenContent(list[i], absl::StrCat(file, " additional_special_tokens[", i, "]")));
      if (content.has_value()) files->additional_special_tokens.push_back(*content);
    }
  }
  return absl::OkStatus();
}

absl::Status ReadAddedTokensDecoder(const Json& config, TokenizerFiles* files) {
  if (!config.contains("added_tokens_decoder")) return absl::OkStatus();
  const Json& decoder = config["added_tokens_decoder"];
  if (!decoder.is_object()) {
    return absl::InvalidArgumentError("tokenizer_config.json: added_tokens_decoder must be an object");
  }
  for (const auto& [key, value] : decoder.items()) {
    AddedTokenEntry entry;
    if (!absl::SimpleAtoi(key, &entry.id) || entry.id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer_config.json: added_tokens_decoder key '", key, "' is not a token id"));
    }
    if (!value.is_object() || !value.contains("content") || !value["content"].is_string() ||
        value["content"].get<std::string>().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer_config.json: added_tokens_decoder[", key, "] needs a non-empty string content"));
    }
    entry.content = value["content"].get<std::string>();
    entry.special = value.value("special", false);
    files->added_tokens.push_back(std::move(entry));
  }
  return absl::OkStatus();
}

absl::Status ReadChatTemplates(const Json& config, TokenizerFiles* files) {
  if (!config.contains("chat_template") || config["chat_template"].is_null()) return absl::OkStatus();
  const Json& value = config["chat_template"];
  if (value.is_string()) {
    files->chat_templates.push_back({"default", value.get<std::string>()});
    return absl::OkStatus();
  }
  if (!value.is_array()) {
    return absl::InvalidArgumentError(
        "tokenizer_config.json: chat_template must be a string or a list of {name, template}");
  }
  for (size_t i = 0; i < value.size(); ++i) {
    const Json& item = value[i];
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string() || !item.contains("template") ||
        !item["template"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer_config.json: chat_template[", i, "] must be {\"name\": string, \"template\": string}"));
    }
    files->chat_templates.push_back({item["name"].get<std::string>(), item["template"].get<std::string>()});
  }
  return absl::OkStatus();
}

absl::Status ReadGenerationEosIds(const std::filesystem::path& dir, TokenizerFiles* files) {
  ERNIE_ASSIGN_OR_RETURN(std::optional<Json> generation, ReadOptionalJson(dir / "generation_config.json"));
  if (!generation.has_value() || !generation->contains("eos_token_id")) return absl::OkStatus();
  const Json& eos = (*generation)["eos_token_id"];
  auto add = [&](const Json& id) -> absl::Status {
    if (!id.is_number_integer()) {
      return absl::InvalidArgumentError("generation_config.json: eos_token_id must be an integer or a list of them");
    }
    files->generation_eos_ids.push_back(id.get<int32_t>());
    return absl::OkStatus();
  };
  if (eos.is_array()) {
    for (const Json& id : eos) ERNIE_RETURN_IF_ERROR(add(id));
  } else if (!eos.is_null()) {
    ERNIE_RETURN_IF_ERROR(add(eos));
  }
  return absl::OkStatus();
}

absl::StatusOr<TokenizerFiles> ReadFilesOrThrow(const std::filesystem::path& dir) {
  TokenizerFiles files;
  ERNIE_ASSIGN_OR_RETURN(std::optional<Json> config, ReadOptionalJson(dir / "tokenizer_config.json"));
  if (!config.has_value()) {
    return absl::NotFoundError(absl::StrCat((dir / "tokenizer_config.json").string(), " does not exist"));
  }
  files.add_bos_token = config->value("add_bos_token", false);
  files.add_eos_token = config->value("add_eos_token", false);
  if (config->contains("model_max_length") && (*config)["model_max_length"].is_number()) {
    // transformers writes 1e30 for "no limit"; anything past int64 is that.
    const double length = (*config)["model_max_length"].get<double>();
    if (length > 0 && length < 9.2e18) files.model_max_length = static_cast<int64_t>(length);
  }
  ERNIE_RETURN_IF_ERROR(ReadAddedTokensDecoder(*config, &files));
  ERNIE_RETURN_IF_ERROR(ReadSpecialTokens(*config, "tokenizer_config.json", &files));
  ERNIE_RETURN_IF_ERROR(ReadChatTemplates(*config, &files));

  ERNIE_ASSIGN_OR_RETURN(std::optional<Json> special_map, ReadOptionalJson(dir / "special_tokens_map.json"));
  if (special_map.has_value()) ERNIE_RETURN_IF_ERROR(ReadSpecialTokens(*special_map, "special_tokens_map.json", &files));

  ERNIE_ASSIGN_OR_RETURN(std::optional<Json> added, ReadOptionalJson(dir / "added_tokens.json"));
  if (added.has_value()) {
    for (const auto& [content, id] : added->items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0) {
        return absl::InvalidArgumentError(absl::StrCat("added_tokens.json: '", content, "' must map to a token id"));
      }
      const bool known = std::any_of(files.added_tokens.begin(), files.added_tokens.end(),
                                     [&](const AddedTokenEntry& e) { return e.id == id.get<int32_t>(); });
      if (!known && !content.empty()) files.added_tokens.push_back({id.get<int32_t>(), content, false});
    }
  }
  std::sort(files.added_tokens.begin(), files.added_tokens.end(),
            [](const AddedTokenEntry& a, const AddedTokenEntry& b) { return a.id < b.id; });

  // A chat_template.jinja file (newer transformers) is the default template.
  ERNIE_ASSIGN_OR_RETURN(std::optional<std::string> jinja, ReadOptionalFile(dir / "chat_template.jinja"));
  if (jinja.has_value()) {
    std::erase_if(files.chat_templates, [](const NamedChatTemplate& t) { return t.name == "default"; });
    files.chat_templates.insert(files.chat_templates.begin(), {"default", *jinja});
  }
  ERNIE_RETURN_IF_ERROR(ReadGenerationEosIds(dir, &files));
  return files;
}

}  // namespace

absl::StatusOr<TokenizerFiles> ReadTokenizerFiles(const std::string& model_dir) {
  try {
    return ReadFilesOrThrow(std::filesystem::path(model_dir));
  } catch (const std::exception& error) {
    // nlohmann::json::value() throws on a key of the wrong type.
    return absl::InvalidArgumentError(absl::StrCat("tokenizer files in ", model_dir, ": ", error.what()));
  }
}

}  // namespace ernie::tokenizer
