// How many tokens a request may generate: what it asked for, checked
// against the model length the way vLLM checks it (400, not 413, with
// vLLM's message), or what the model length leaves when it asked for none.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "gateway/openai/api_error.h"

namespace ernie::gateway {

// `prompt_field` names the field in errors ("messages" or "prompt").
// `default_cap` (generation_config.json's max_new_tokens) bounds an
// unrequested budget. max_model_len <= 0 means unknown: no check.
std::variant<int32_t, ApiError> ResolveMaxTokens(int64_t prompt_tokens, std::optional<int64_t> requested,
                                                 int32_t max_model_len, std::optional<int64_t> default_cap,
                                                 const std::string& prompt_field);

}  // namespace ernie::gateway
