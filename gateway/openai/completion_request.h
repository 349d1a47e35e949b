// POST /v1/completions: the request body read and validated.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "gateway/openai/api_error.h"
#include "gateway/openai/field_reader.h"
#include "gateway/openai/generation_params.h"

namespace ernie::gateway {

// One prompt: text to encode, or token ids as given.
struct PromptInput {
  std::string text;
  std::vector<int32_t> token_ids;
  bool is_tokens = false;
};

struct CompletionRequest {
  std::string model;
  std::vector<PromptInput> prompts;  // one choice group of n per prompt
  bool echo = false;                 // prepend the prompt to the text
  GenerationParams params;           // logprobs: the integer field (alternatives), as top_logprobs
};

std::variant<CompletionRequest, ApiError> ParseCompletionRequest(const Json& body, const GenerationLimits& limits);

}  // namespace ernie::gateway
