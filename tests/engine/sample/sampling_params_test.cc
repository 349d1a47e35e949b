#include "engine/sample/sampling_params.h"

#include <string>

#include <gtest/gtest.h>

namespace ernie {
namespace {

constexpr int64_t kVocab = 1002;
constexpr int64_t kMaxModelLen = 4096;
constexpr int64_t kPromptLen = 96;

// The error of `params`, which must be InvalidArgument.
std::string ErrorOf(const SamplingParams& params, int64_t prompt_len = kPromptLen) {
  const absl::Status status = ValidateSamplingParams(params, kVocab, kMaxModelLen, prompt_len);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  return std::string(status.message());
}

TEST(SamplingParamsTest, DefaultsAndTypicalRequestsAreValid) {
  EXPECT_TRUE(ValidateSamplingParams({}, kVocab, kMaxModelLen, kPromptLen).ok());
  const SamplingParams typical{.temperature = 0.8f,
                               .top_p = 0.8f,
                               .top_k = 50,
                               .min_p = 0.05f,
                               .repetition_penalty = 1.1f,
                               .presence_penalty = -2.0f,
                               .frequency_penalty = 2.0f,
                               .logit_bias = {{0, -100.0f}, {1001, 100.0f}},
                               .seed = 7,
                               .stop_token_ids = {2, 1001},
                               .min_tokens = 4,
                               .max_tokens = kMaxModelLen - kPromptLen,
                               .logprobs = true,
                               .top_logprobs = 20,
                               .n = 128};
  EXPECT_TRUE(ValidateSamplingParams(typical, kVocab, kMaxModelLen, kPromptLen).ok());
  // Greedy, top_k 0 (off) and a large temperature are fine, as in vLLM.
  EXPECT_TRUE(ValidateSamplingParams({.temperature = 0.0f, .top_k = 0}, kVocab, kMaxModelLen, kPromptLen).ok());
  EXPECT_TRUE(ValidateSamplingParams({.temperature = 5.0f}, kVocab, kMaxModelLen, kPromptLen).ok());
}

TEST(SamplingParamsTest, RangeErrorsNameTheFieldAndTheRange) {
  EXPECT_EQ(ErrorOf({.temperature = -0.5f}), "temperature must be non-negative, got -0.5");
  EXPECT_EQ(ErrorOf({.top_p = 0.0f}), "top_p must be in (0, 1], got 0");
  EXPECT_EQ(ErrorOf({.top_p = 1.5f}), "top_p must be in (0, 1], got 1.5");
  EXPECT_EQ(ErrorOf({.top_k = -2}), "top_k must be -1 or 0 (disabled), or at least 1, got -2");
  EXPECT_EQ(ErrorOf({.min_p = 1.25f}), "min_p must be in [0, 1], got 1.25");
  EXPECT_EQ(ErrorOf({.repetition_penalty = 0.0f}), "repetition_penalty must be in (0, 2], got 0");
  EXPECT_EQ(ErrorOf({.repetition_penalty = 2.5f}), "repetition_penalty must be in (0, 2], got 2.5");
  EXPECT_EQ(ErrorOf({.presence_penalty = 2.5f}), "presence_penalty must be in [-2, 2], got 2.5");
  EXPECT_EQ(ErrorOf({.frequency_penalty = -3.0f}), "frequency_penalty must be in [-2, 2], got -3");
  EXPECT_EQ(ErrorOf({.min_tokens = -1}), "min_tokens must be at least 0, got -1");
  EXPECT_EQ(ErrorOf({.max_tokens = 0}), "max_tokens must be at least 1, got 0");
  EXPECT_EQ(ErrorOf({.top_logprobs = 21, .n = 1}), "top_logprobs must be in [0, 20], got 21");
  EXPECT_EQ(ErrorOf({.n = 0}), "n must be in [1, 128], got 0");
  EXPECT_EQ(ErrorOf({.n = 129}), "n must be in [1, 128], got 129");
}

TEST(SamplingParamsTest, NonFiniteFloatsAreRejectedByName) {
  EXPECT_EQ(ErrorOf({.temperature = std::numeric_limits<float>::quiet_NaN()}),
            "temperature must be a finite number, got nan");
  EXPECT_EQ(ErrorOf({.top_p = std::numeric_limits<float>::infinity()}), "top_p must be a finite number, got inf");
  EXPECT_EQ(ErrorOf({.presence_penalty = std::numeric_limits<float>::quiet_NaN()}),
            "presence_penalty must be a finite number, got nan");
}

TEST(SamplingParamsTest, TokenIdsMustBeInsideTheVocabulary) {
  EXPECT_EQ(ErrorOf({.logit_bias = {{1002, 1.0f}}}),
            "logit_bias contains token id 1002, outside the vocabulary [0, 1002)");
  EXPECT_EQ(ErrorOf({.logit_bias = {{-1, 1.0f}}}), "logit_bias contains token id -1, outside the vocabulary [0, 1002)");
  EXPECT_EQ(ErrorOf({.logit_bias = {{5, 150.0f}}}), "logit_bias value for token 5 must be in [-100, 100], got 150");
  EXPECT_EQ(ErrorOf({.stop_token_ids = {2, 5000}}),
            "stop_token_ids contains token id 5000, outside the vocabulary [0, 1002)");
}

TEST(SamplingParamsTest, LengthsMustFitTheContext) {
  EXPECT_TRUE(ValidateSamplingParams({.max_tokens = kMaxModelLen - kPromptLen}, kVocab, kMaxModelLen, kPromptLen).ok());
  EXPECT_EQ(ErrorOf({.max_tokens = kMaxModelLen - kPromptLen + 1}),
            "max_tokens is too large: this model's maximum context length is 4096 tokens. However, you requested "
            "4097 tokens (96 in the prompt, 4001 in max_tokens). Please reduce the length of the prompt or "
            "max_tokens.");
  EXPECT_EQ(ErrorOf({}, 4096),
            "This model's maximum context length is 4096 tokens. However, the prompt has 4096 tokens, which leaves "
            "no room for output. Please reduce the length of the prompt.");
  EXPECT_EQ(ErrorOf({}, 0), "prompt length must be at least 1 token, got 0");
  EXPECT_EQ(ErrorOf({.min_tokens = 11, .max_tokens = 10}), "min_tokens must be less than or equal to max_tokens=10, got 11");
  // Without max_tokens the bound is what is left of the context.
  EXPECT_EQ(ErrorOf({.min_tokens = 4001}), "min_tokens must be less than or equal to max_tokens=4000, got 4001");
  EXPECT_EQ(EffectiveMaxTokens({}, kMaxModelLen, kPromptLen), 4000);
  EXPECT_EQ(EffectiveMaxTokens({.max_tokens = 16}, kMaxModelLen, kPromptLen), 16);
}

TEST(SamplingParamsTest, TopLogprobsNeedsLogprobs) {
  EXPECT_EQ(ErrorOf({.logprobs = false, .top_logprobs = 3}),
            "top_logprobs requires logprobs to be true, got top_logprobs 3 with logprobs false");
}

TEST(SamplingParamsTest, GreedyIsTemperatureBelowEpsilon) {
  EXPECT_TRUE(IsGreedy({.temperature = 0.0f}));
  EXPECT_TRUE(IsGreedy({.temperature = 1e-6f}));
  EXPECT_FALSE(IsGreedy({.temperature = 0.01f}));
}

}  // namespace
}  // namespace ernie
