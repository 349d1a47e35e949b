// Fuzz target: the OpenAI request validation of the gateway
// (gateway/openai): a JSON body read as a chat or completions request, the
// token budget resolved and the worker's SamplingParams built, as the
// generation routes do; and generation_config.json read as the gateway
// reads its defaults. Every body must give a request or a 400 naming the
// field, whose JSON serialises.
//
// Input: one selector byte (0: chat, 1: completions, 2: generation
// defaults; others wrap), then the JSON text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "fuzz_check.h"
#include "gateway/openai/chat_request.h"
#include "gateway/openai/completion_request.h"
#include "gateway/openai/context_length.h"

namespace {

using namespace ernie::gateway;

const GenerationLimits kLimits{.vocab_size = 1002};
constexpr int32_t kMaxModelLen = 4096;

void CheckError(const ApiError& error) {
  ERNIE_FUZZ_CHECK(error.status >= 400 && error.status < 500, "a 4xx answer");
  ERNIE_FUZZ_CHECK(!error.message.empty(), "an error says why");
  (void)error.ToJsonString();  // must not throw (nlohmann throws on invalid UTF-8)
}

// What the routes do once a request is valid: the budget, then the
// worker's sampling parameters.
void BuildSampling(const GenerationParams& params, int64_t prompt_tokens, const GenerationDefaults& defaults) {
  ERNIE_FUZZ_CHECK(params.n >= 1 && params.n <= kLimits.max_n, "n within its limit");
  ERNIE_FUZZ_CHECK(params.top_logprobs >= 0 && params.top_logprobs <= kLimits.max_logprobs, "top_logprobs");
  for (int32_t id : params.stop_token_ids) ERNIE_FUZZ_CHECK(id >= 0 && id < kLimits.vocab_size, "stop id");
  for (const auto& [id, bias] : params.logit_bias) ERNIE_FUZZ_CHECK(id >= 0 && id < kLimits.vocab_size, "bias id");
  auto budget = ResolveMaxTokens(prompt_tokens, params.max_tokens, kMaxModelLen, defaults.max_new_tokens, "prompt");
  if (auto* error = std::get_if<ApiError>(&budget)) return CheckError(*error);
  const int32_t max_tokens = std::get<int32_t>(budget);
  ERNIE_FUZZ_CHECK(max_tokens > 0 && prompt_tokens + max_tokens <= kMaxModelLen, "budget fits the model");
  (void)ToSamplingParams(params, defaults, max_tokens);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int selector = data[0] % 3;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  // Defaults as a model's generation_config.json might give them.
  const GenerationDefaults defaults{.temperature = 0.8, .top_p = 0.8, .max_new_tokens = 512};
  if (selector == 2) {
    auto parsed = ParseGenerationDefaults(text, "generation_config.json");
    if (parsed.ok()) (void)ToSamplingParams(GenerationParams{}, *parsed, 16);
    return 0;
  }
  Json body;
  if (auto error = ParseJsonObject(text, &body)) {
    CheckError(*error);
    return 0;
  }
  if (selector == 0) {
    auto request = ParseChatCompletionRequest(body, kLimits);
    if (auto* error = std::get_if<ApiError>(&request)) return CheckError(*error), 0;
    const auto& chat = std::get<ChatCompletionRequest>(request);
    ERNIE_FUZZ_CHECK(chat.messages.is_array() && !chat.messages.empty(), "messages kept");
    for (const auto& message : chat.messages) {
      const auto content = message.find("content");
      ERNIE_FUZZ_CHECK(content == message.end() || content->is_string() || content->is_null(),
                       "content joined into a string");
    }
    BuildSampling(chat.params, static_cast<int64_t>(chat.messages.size()), defaults);
  } else {
    auto request = ParseCompletionRequest(body, kLimits);
    if (auto* error = std::get_if<ApiError>(&request)) return CheckError(*error), 0;
    const auto& completion = std::get<CompletionRequest>(request);
    ERNIE_FUZZ_CHECK(!completion.prompts.empty(), "at least one prompt");
    for (const PromptInput& prompt : completion.prompts) {
      for (int32_t id : prompt.token_ids) ERNIE_FUZZ_CHECK(id >= 0 && id < kLimits.vocab_size, "prompt id");
      const int64_t tokens = prompt.is_tokens ? static_cast<int64_t>(prompt.token_ids.size())
                                              : static_cast<int64_t>(prompt.text.size());
      BuildSampling(completion.params, tokens, defaults);
    }
  }
  return 0;
}
