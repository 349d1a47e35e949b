// The Hugging Face JSON files beside tokenizer.model, read into plain
// values: tokenizer_config.json, special_tokens_map.json (overrides the
// config's special tokens when present), added_tokens.json and
// generation_config.json (both optional), chat_template.jinja (optional).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ernie::tokenizer {

struct AddedTokenEntry {
  int32_t id = 0;
  std::string content;
  bool special = false;
};

struct NamedChatTemplate {
  std::string name;    // "default" for a template given as a plain string
  std::string source;  // the Jinja2 program
};

struct TokenizerFiles {
  std::vector<AddedTokenEntry> added_tokens;  // added_tokens_decoder, then added_tokens.json extras; by id
  // Named special tokens in a fixed order: bos_token, eos_token, unk_token,
  // sep_token, pad_token, cls_token, mask_token (only those present).
  std::vector<std::pair<std::string, std::string>> named_special_tokens;
  std::vector<std::string> additional_special_tokens;
  bool add_bos_token = false;  // Ernie4_5_Tokenizer's defaults
  bool add_eos_token = false;
  std::vector<NamedChatTemplate> chat_templates;
  std::optional<int64_t> model_max_length;
  std::vector<int32_t> generation_eos_ids;  // generation_config.json eos_token_id (int or list)
};

// NotFound when tokenizer_config.json is missing; InvalidArgument naming the
// file and key for malformed JSON or a value of the wrong type.
absl::StatusOr<TokenizerFiles> ReadTokenizerFiles(const std::string& model_dir);

}  // namespace ernie::tokenizer
