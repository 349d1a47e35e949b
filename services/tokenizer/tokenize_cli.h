// ernie-tokenize: one tokenization as a JSON object
// {"ids": [...], "text": "...", "pieces": [...]}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "services/tokenizer/tokenizer.h"

namespace ernie::tokenizer {

struct TokenizeCommand {
  std::optional<std::string> text;
  std::optional<std::vector<int32_t>> ids;
  std::optional<std::string> messages;  // a JSON array, or a file holding one
  std::optional<std::string> tools;     // a JSON array, or a file holding one
  std::optional<std::string> template_kwargs;  // a JSON object
  bool add_generation_prompt = true;
  bool render = false;         // "text" is the rendered prompt (with messages)
  bool parse_special = false;  // special-token strings in --text become their ids
  bool skip_special = false;   // decode without special tokens
};

// "1,2,3" -> ids; InvalidArgument naming the bad element.
absl::StatusOr<std::vector<int32_t>> ParseIdList(const std::string& list);

// Exactly one of text / ids / messages must be set. "text" is the decode of
// "ids" (skip_special applies) unless render is set for messages; "pieces"
// are the ids' spellings.
absl::StatusOr<nlohmann::ordered_json> RunTokenize(const Tokenizer& tokenizer, const TokenizeCommand& command);

}  // namespace ernie::tokenizer
