#include "engine/sample/sampling_params.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"

namespace ernie {
namespace {

// "<field> must be <range>, got <value>": the one message shape every range
// error uses, so clients can rely on it naming the field first.
template <typename T>
absl::Status OutOfRange(const char* field, const char* range, T value) {
  return absl::InvalidArgumentError(absl::StrCat(field, " must be ", range, ", got ", value));
}

absl::Status CheckFinite(const char* field, float value) {
  if (std::isfinite(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " must be a finite number, got ", value));
}

absl::Status CheckTokenInVocabulary(const char* field, int32_t token_id, int64_t vocab_size) {
  if (token_id >= 0 && token_id < vocab_size) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " contains token id ", token_id,
                                                 ", outside the vocabulary [0, ", vocab_size, ")"));
}

absl::Status ValidateDistributionShaping(const SamplingParams& p) {
  ERNIE_RETURN_IF_ERROR(CheckFinite("temperature", p.temperature));
  if (p.temperature < 0.0f) return OutOfRange("temperature", "non-negative", p.temperature);
  ERNIE_RETURN_IF_ERROR(CheckFinite("top_p", p.top_p));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return OutOfRange("top_p", "in (0, 1]", p.top_p);
  if (p.top_k < -1) return OutOfRange("top_k", "-1 or 0 (disabled), or at least 1", p.top_k);
  ERNIE_RETURN_IF_ERROR(CheckFinite("min_p", p.min_p));
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return OutOfRange("min_p", "in [0, 1]", p.min_p);
  return absl::OkStatus();
}

absl::Status ValidatePenalties(const SamplingParams& p, int64_t vocab_size) {
  ERNIE_RETURN_IF_ERROR(CheckFinite("repetition_penalty", p.repetition_penalty));
  if (!(p.repetition_penalty > 0.0f && p.repetition_penalty <= 2.0f)) {
    return OutOfRange("repetition_penalty", "in (0, 2]", p.repetition_penalty);
  }
  ERNIE_RETURN_IF_ERROR(CheckFinite("presence_penalty", p.presence_penalty));
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) {
    return OutOfRange("presence_penalty", "in [-2, 2]", p.presence_penalty);
  }
  ERNIE_RETURN_IF_ERROR(CheckFinite("frequency_penalty", p.frequency_penalty));
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    return OutOfRange("frequency_penalty", "in [-2, 2]", p.frequency_penalty);
  }
  for (const auto& [token_id, bias] : p.logit_bias) {
    ERNIE_RETURN_IF_ERROR(CheckTokenInVocabulary("logit_bias", token_id, vocab_size));
    if (!(bias >= -kMaxAbsLogitBias && bias <= kMaxAbsLogitBias)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "logit_bias value for token ", token_id, " must be in [-100, 100], got ", bias));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateLengths(const SamplingParams& p, int64_t max_model_len, int64_t prompt_len) {
  if (prompt_len < 1) return OutOfRange("prompt length", "at least 1 token", prompt_len);
  if (prompt_len >= max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "This model's maximum context length is ", max_model_len, " tokens. However, the prompt has ",
        prompt_len, " tokens, which leaves no room for output. Please reduce the length of the prompt."));
  }
  if (p.max_tokens.has_value()) {
    if (*p.max_tokens < 1) return OutOfRange("max_tokens", "at least 1", *p.max_tokens);
    if (prompt_len + *p.max_tokens > max_model_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          "max_tokens is too large: this model's maximum context length is ", max_model_len,
          " tokens. However, you requested ", prompt_len + *p.max_tokens, " tokens (", prompt_len,
          " in the prompt, ", *p.max_tokens,
          " in max_tokens). Please reduce the length of the prompt or max_tokens."));
    }
  }
  if (p.min_tokens < 0) return OutOfRange("min_tokens", "at least 0", p.min_tokens);
  const int64_t max_tokens = EffectiveMaxTokens(p, max_model_len, prompt_len);
  if (p.min_tokens > max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("min_tokens must be less than or equal to max_tokens=",
                                                   max_tokens, ", got ", p.min_tokens));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size,
                                    int64_t max_model_len, int64_t prompt_len) {
  if (vocab_size < 1 || vocab_size > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size must be in [1, 2^31), got ", vocab_size));
  }
  if (params.n < 1 || params.n > kMaxSamplesPerRequest) {
    return OutOfRange("n", "in [1, 128]", params.n);
  }
  ERNIE_RETURN_IF_ERROR(ValidateDistributionShaping(params));
  ERNIE_RETURN_IF_ERROR(ValidatePenalties(params, vocab_size));
  for (int32_t token_id : params.stop_token_ids) {
    ERNIE_RETURN_IF_ERROR(CheckTokenInVocabulary("stop_token_ids", token_id, vocab_size));
  }
  ERNIE_RETURN_IF_ERROR(ValidateLengths(params, max_model_len, prompt_len));
  if (params.top_logprobs < 0 || params.top_logprobs > kMaxTopLogprobs) {
    return OutOfRange("top_logprobs", "in [0, 20]", params.top_logprobs);
  }
  if (params.top_logprobs > 0 && !params.logprobs) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_logprobs requires logprobs to be true, got top_logprobs ", params.top_logprobs,
                     " with logprobs false"));
  }
  return absl::OkStatus();
}

int64_t EffectiveMaxTokens(const SamplingParams& params, int64_t max_model_len, int64_t prompt_len) {
  return params.max_tokens.value_or(max_model_len - prompt_len);
}

}  // namespace ernie
