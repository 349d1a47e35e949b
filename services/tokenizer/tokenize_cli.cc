#include "services/tokenizer/tokenize_cli.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/util/status_macros.h"

namespace ernie::tokenizer {
namespace {

using OrderedJson = nlohmann::ordered_json;

// The flag's value is JSON itself, or the path of a file holding it.
absl::StatusOr<OrderedJson> JsonFromFlag(const std::string& value, const char* flag) {
  std::string text = value;
  std::error_code error;
  if (!value.empty() && value.front() != '[' && value.front() != '{' && std::filesystem::exists(value, error)) {
    std::ifstream in(value, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    text = buffer.str();
  }
  OrderedJson json = OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": neither valid JSON nor a file holding JSON"));
  }
  return json;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ParseIdList(const std::string& list) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(part, &id)) {
      return absl::InvalidArgumentError(absl::StrCat("--ids: '", part, "' is not a token id"));
    }
    ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<OrderedJson> RunTokenize(const Tokenizer& tokenizer, const TokenizeCommand& command) {
  const int inputs = command.text.has_value() + command.ids.has_value() + command.messages.has_value();
  if (inputs != 1) return absl::InvalidArgumentError("give exactly one of --text, --ids, --messages");
  std::vector<int32_t> ids;
  std::optional<std::string> rendered;
  if (command.text.has_value()) {
    ERNIE_ASSIGN_OR_RETURN(Encoding encoding,
                           tokenizer.Encode(*command.text, {.parse_special_tokens = command.parse_special}));
    ids = std::move(encoding.ids);
  } else if (command.ids.has_value()) {
    ids = *command.ids;
  } else {
    ChatRequest request;
    ERNIE_ASSIGN_OR_RETURN(request.messages, JsonFromFlag(*command.messages, "--messages"));
    if (command.tools.has_value()) {
      ERNIE_ASSIGN_OR_RETURN(request.tools, JsonFromFlag(*command.tools, "--tools"));
    }
    if (command.template_kwargs.has_value()) {
      ERNIE_ASSIGN_OR_RETURN(request.kwargs, JsonFromFlag(*command.template_kwargs, "--template-kwargs"));
      if (!request.kwargs.is_object()) return absl::InvalidArgumentError("--template-kwargs must be a JSON object");
    }
    request.add_generation_prompt = command.add_generation_prompt;
    ERNIE_ASSIGN_OR_RETURN(std::string prompt, tokenizer.ApplyChatTemplate(request));
    ERNIE_ASSIGN_OR_RETURN(Encoding encoding, tokenizer.Encode(prompt, {.parse_special_tokens = true}));
    ids = std::move(encoding.ids);
    if (command.render) rendered = std::move(prompt);
  }
  OrderedJson pieces = OrderedJson::array();
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer.vocab_size() || tokenizer.IdToPiece(id).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " is outside the vocabulary"));
    }
    pieces.push_back(std::string(tokenizer.IdToPiece(id)));
  }
  std::string text;
  if (rendered.has_value()) {
    text = *std::move(rendered);
  } else {
    ERNIE_ASSIGN_OR_RETURN(text, tokenizer.Decode(ids, command.skip_special));
  }
  OrderedJson out = OrderedJson::object();
  out["ids"] = ids;
  out["text"] = text;
  out["pieces"] = std::move(pieces);
  return out;
}

}  // namespace ernie::tokenizer
