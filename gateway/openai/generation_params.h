// The sampling and output fields chat and completions requests share, read
// and validated the way vLLM's OpenAI server reads them, and merged with the
// model's generation_config.json defaults into the worker's SamplingParams.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ernie/v1/worker.pb.h"
#include "gateway/openai/field_reader.h"

namespace ernie::gateway {

// Defaults from generation_config.json (absent keys stay unset, and then
// OpenAI's own defaults apply: temperature 1, top_p 1, ...).
struct GenerationDefaults {
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<double> presence_penalty;
  std::optional<double> frequency_penalty;
  std::optional<int64_t> max_new_tokens;  // caps max_tokens when the request sets none
};

// Reads DIR/generation_config.json. A missing file gives empty defaults;
// a malformed one InvalidArgument naming the file and the key.
absl::StatusOr<GenerationDefaults> LoadGenerationDefaults(const std::string& model_dir);
// The same from a JSON object's text (the --generation-config flag).
absl::StatusOr<GenerationDefaults> ParseGenerationDefaults(const std::string& json_text, const std::string& origin);

// What one request may ask for: each limit is a flag of ernie-gateway, and a
// request beyond it gets a 400 naming the field and the limit.
struct GenerationLimits {
  int max_n = 128;                     // n above this is refused (--max-n)
  int max_logprobs = 20;               // top_logprobs / completions logprobs above this are refused
  int32_t vocab_size = 0;              // > 0: logit_bias and stop_token_ids must be below it
  int64_t max_tokens = 131072;         // max_tokens above this is refused (--max-tokens-limit)
  int64_t max_prompt_tokens = 0;       // > 0: longer prompts are refused (--max-prompt-tokens)
  int max_stop_strings = 16;           // entries of `stop` (--max-stop-strings)
  size_t max_stop_string_bytes = 256;  // bytes of one stop string (--max-stop-string-bytes)
  int max_logit_bias = 1024;           // entries of `logit_bias` (--max-logit-bias)
};

struct GenerationParams {
  int n = 1;
  std::optional<int64_t> max_tokens;  // unset: whatever the model length leaves
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<double> presence_penalty;
  std::optional<double> frequency_penalty;
  std::map<int32_t, float> logit_bias;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;      // stop strings (not in the output)
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int64_t min_tokens = 0;
  bool skip_special_tokens = true;
  bool logprobs = false;              // chat: logprobs; completions: logprobs != null
  int top_logprobs = 0;               // alternatives per token
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  std::string user;
};

// Reads every shared field of `request`. `max_tokens_fields` lists the names
// that set max_tokens in order of precedence (chat: max_completion_tokens,
// then max_tokens). logprobs/top_logprobs differ between the APIs and are
// read by the callers.
void ReadGenerationParams(FieldReader& reader, const GenerationLimits& limits,
                          const std::vector<const char*>& max_tokens_fields, GenerationParams* out);

// The worker's SamplingParams: request fields first, then the defaults,
// then OpenAI's. `max_tokens` is the resolved budget (> 0).
ernie::v1::SamplingParams ToSamplingParams(const GenerationParams& params, const GenerationDefaults& defaults,
                                           int32_t max_tokens);

}  // namespace ernie::gateway
