// POST /v1/chat/completions: the request body read and validated.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "gateway/openai/api_error.h"
#include "gateway/openai/field_reader.h"
#include "gateway/openai/generation_params.h"

namespace ernie::gateway {

struct ChatCompletionRequest {
  std::string model;
  // The messages for the template, content arrays of text parts joined into
  // one string (as vLLM does for string-content templates). Key order kept.
  Json messages = Json::array();
  std::optional<Json> tools;              // passed to the template untouched
  Json chat_template_kwargs = Json::object();
  bool add_generation_prompt = true;
  GenerationParams params;
};

// Either the request or the 400 naming the bad field.
std::variant<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(const Json& body,
                                                                        const GenerationLimits& limits);

}  // namespace ernie::gateway
