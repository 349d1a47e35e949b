#include "gateway/openai/completion_request.h"

#include "absl/strings/str_cat.h"

namespace ernie::gateway {
namespace {

bool IsTokenList(const Json& value) {
  if (!value.is_array() || value.empty()) return false;
  for (const Json& item : value) {
    if (!item.is_number_integer() && !item.is_number_unsigned()) return false;
  }
  return true;
}

std::optional<PromptInput> TokensPrompt(const Json& value, const std::string& where, const GenerationLimits& limits,
                                        FieldReader& reader) {
  PromptInput prompt{.is_tokens = true};
  for (size_t i = 0; i < value.size(); ++i) {
    const int64_t id = value[i].is_number_unsigned() && value[i].get<uint64_t>() > INT32_MAX
                           ? INT64_MAX
                           : value[i].get<int64_t>();
    if (id < 0 || id > INT32_MAX || (limits.vocab_size > 0 && id >= limits.vocab_size)) {
      reader.Fail(absl::StrCat(where, "[", i, "]"),
                  absl::StrCat("token id ", id, " in '", where, "' is outside the vocabulary"));
      return std::nullopt;
    }
    prompt.token_ids.push_back(static_cast<int32_t>(id));
  }
  return prompt;
}

void ReadPrompts(FieldReader& reader, const GenerationLimits& limits, std::vector<PromptInput>* out) {
  const Json* prompt = reader.Get("prompt");
  if (prompt == nullptr) return reader.Fail("prompt", "'prompt' is required");
  if (prompt->is_string()) {
    out->push_back(PromptInput{.text = prompt->get<std::string>()});
    return;
  }
  const char* kShape = "'prompt' must be a string, an array of strings, an array of token ids or an array of "
                       "token-id arrays";
  if (!prompt->is_array() || prompt->empty()) return reader.Fail("prompt", kShape);
  if (IsTokenList(*prompt)) {
    if (auto tokens = TokensPrompt(*prompt, "prompt", limits, reader)) out->push_back(std::move(*tokens));
    return;
  }
  for (size_t i = 0; i < prompt->size(); ++i) {
    const Json& item = (*prompt)[i];
    const std::string where = absl::StrCat("prompt[", i, "]");
    if (item.is_string()) {
      out->push_back(PromptInput{.text = item.get<std::string>()});
    } else if (IsTokenList(item)) {
      auto tokens = TokensPrompt(item, where, limits, reader);
      if (!tokens) return;
      out->push_back(std::move(*tokens));
    } else {
      return reader.Fail(where, kShape);
    }
  }
}

}  // namespace

std::variant<CompletionRequest, ApiError> ParseCompletionRequest(const Json& body, const GenerationLimits& limits) {
  FieldReader reader(body);
  CompletionRequest request;
  request.model = reader.String("model").value_or("");
  ReadPrompts(reader, limits, &request.prompts);
  if (const Json* suffix = reader.Get("suffix"); suffix != nullptr && !(suffix->is_string() && suffix->empty())) {
    reader.Fail("suffix", "'suffix' is not supported: this server does not do fill-in-the-middle");
  }
  if (auto best_of = reader.Integer("best_of", 1, 1 << 20); best_of && *best_of > 1) {
    reader.Fail("best_of", "'best_of' greater than 1 is not supported");
  }
  if (auto echo = reader.Bool("echo")) request.echo = *echo;
  ReadGenerationParams(reader, limits, {"max_tokens"}, &request.params);
  if (!reader.Get("max_tokens") && !reader.error()) request.params.max_tokens = 16;  // OpenAI's completions default
  if (auto logprobs = reader.Integer("logprobs", 0, limits.max_logprobs)) {
    request.params.logprobs = true;
    request.params.top_logprobs = static_cast<int>(*logprobs);
  }
  if (reader.error()) return *reader.error();
  return request;
}

}  // namespace ernie::gateway
