// Chat and completions request bodies: every field read, every bad value
// refused with status 400 and the field named in `param`.
#include <gtest/gtest.h>

#include "gateway/openai/chat_request.h"
#include "gateway/openai/completion_request.h"

namespace ernie::gateway {
namespace {

const GenerationLimits kLimits{.max_n = 8, .max_logprobs = 20, .vocab_size = 100};

Json Chat(Json extra) {
  Json body = {{"model", "m"}, {"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (auto& [key, value] : extra.items()) body[key] = value;
  return body;
}

ApiError ChatError(Json body) {
  auto parsed = ParseChatCompletionRequest(body, kLimits);
  if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
  ADD_FAILURE() << "accepted: " << body.dump();
  return ApiError{};
}

ChatCompletionRequest ChatOk(Json body) {
  auto parsed = ParseChatCompletionRequest(body, kLimits);
  if (auto* error = std::get_if<ApiError>(&parsed)) {
    ADD_FAILURE() << "refused: " << error->message;
    return {};
  }
  return std::get<ChatCompletionRequest>(std::move(parsed));
}

TEST(ChatRequestTest, ReadsEveryField) {
  const ChatCompletionRequest r = ChatOk(Chat({{"max_tokens", 7}, {"temperature", 0.5}, {"top_p", 0.9}, {"n", 2},
                                               {"stop", "x"}, {"seed", 42}, {"presence_penalty", 0.5},
                                               {"frequency_penalty", -0.5}, {"logit_bias", {{"5", 10.0}}},
                                               {"logprobs", true}, {"top_logprobs", 3}, {"stream", true},
                                               {"stream_options", {{"include_usage", true}}}, {"user", "u"},
                                               {"top_k", 40}, {"min_p", 0.1}, {"repetition_penalty", 1.1},
                                               {"stop_token_ids", {2, 3}}, {"ignore_eos", true}, {"min_tokens", 2},
                                               {"skip_special_tokens", false},
                                               {"chat_template_kwargs", {{"enable_thinking", false}}},
                                               {"response_format", {{"type", "text"}}}, {"tool_choice", "auto"}}));
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_DOUBLE_EQ(*r.params.temperature, 0.5);
  EXPECT_DOUBLE_EQ(*r.params.top_p, 0.9);
  EXPECT_EQ(r.params.n, 2);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.params.seed, 42u);
  EXPECT_FLOAT_EQ(r.params.logit_bias.at(5), 10.0f);
  EXPECT_TRUE(r.params.logprobs);
  EXPECT_EQ(r.params.top_logprobs, 3);
  EXPECT_TRUE(r.params.stream);
  EXPECT_TRUE(r.params.include_usage);
  EXPECT_EQ(r.params.user, "u");
  EXPECT_EQ(r.params.top_k, 40);
  EXPECT_DOUBLE_EQ(*r.params.min_p, 0.1);
  EXPECT_DOUBLE_EQ(*r.params.repetition_penalty, 1.1);
  EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{2, 3}));
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_EQ(r.params.min_tokens, 2);
  EXPECT_FALSE(r.params.skip_special_tokens);
  EXPECT_EQ(r.chat_template_kwargs.dump(), R"({"enable_thinking":false})");
}

TEST(ChatRequestTest, MaxCompletionTokensTakesPrecedence) {
  EXPECT_EQ(ChatOk(Chat({{"max_tokens", 7}, {"max_completion_tokens", 9}})).params.max_tokens, 9);
  EXPECT_FALSE(ChatOk(Chat({})).params.max_tokens.has_value());
}

TEST(ChatRequestTest, ContentPartsAreJoinedAndKeyOrderKept) {
  Json body = Chat({});
  body["messages"] = Json::parse(
      R"([{"role":"system","content":"S"},{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"role":"user"}])");
  const ChatCompletionRequest r = ChatOk(body);
  EXPECT_EQ(r.messages.dump(), R"([{"role":"system","content":"S"},{"content":"a\nb","role":"user"}])");
}

TEST(ChatRequestTest, StopListAndDefaults) {
  const ChatCompletionRequest r = ChatOk(Chat({{"stop", {"a", "", "b"}}}));
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"a", "b"}));
  const ChatCompletionRequest d = ChatOk(Chat({}));
  EXPECT_EQ(d.params.n, 1);
  EXPECT_FALSE(d.params.stream);
  EXPECT_TRUE(d.params.skip_special_tokens);
  EXPECT_FALSE(d.params.temperature.has_value());
}

struct BadCase {
  const char* name;
  Json extra;
  const char* param;
};

TEST(ChatRequestTest, BadFieldsNameTheField) {
  const std::vector<BadCase> cases = {
      {"temperature type", {{"temperature", "hot"}}, "temperature"},
      {"temperature range", {{"temperature", -0.1}}, "temperature"},
      {"top_p zero", {{"top_p", 0}}, "top_p"},
      {"top_p range", {{"top_p", 1.5}}, "top_p"},
      {"n zero", {{"n", 0}}, "n"},
      {"n too large", {{"n", 9}}, "n"},
      {"n float", {{"n", 1.5}}, "n"},
      {"max_tokens zero", {{"max_tokens", 0}}, "max_tokens"},
      {"max_completion_tokens type", {{"max_completion_tokens", "x"}}, "max_completion_tokens"},
      {"presence range", {{"presence_penalty", 2.5}}, "presence_penalty"},
      {"frequency range", {{"frequency_penalty", -3}}, "frequency_penalty"},
      {"logit_bias type", {{"logit_bias", {1, 2}}}, "logit_bias"},
      {"logit_bias key", {{"logit_bias", {{"abc", 1}}}}, "logit_bias.abc"},
      {"logit_bias id", {{"logit_bias", {{"100", 1}}}}, "logit_bias.100"},
      {"logit_bias value", {{"logit_bias", {{"5", 101}}}}, "logit_bias.5"},
      {"seed type", {{"seed", "x"}}, "seed"},
      {"stop type", {{"stop", 5}}, "stop"},
      {"stop item", {{"stop", {"a", 5}}}, "stop[1]"},
      {"stop_token_ids range", {{"stop_token_ids", {1, 100}}}, "stop_token_ids[1]"},
      {"top_k range", {{"top_k", -2}}, "top_k"},
      {"min_p range", {{"min_p", 1.5}}, "min_p"},
      {"repetition_penalty zero", {{"repetition_penalty", 0}}, "repetition_penalty"},
      {"min_tokens over max", {{"min_tokens", 5}, {"max_tokens", 4}}, "min_tokens"},
      {"ignore_eos type", {{"ignore_eos", 1}}, "ignore_eos"},
      {"logprobs type", {{"logprobs", "yes"}}, "logprobs"},
      {"top_logprobs without logprobs", {{"top_logprobs", 2}}, "top_logprobs"},
      {"top_logprobs range", {{"logprobs", true}, {"top_logprobs", 21}}, "top_logprobs"},
      {"stream_options without stream", {{"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {"include_usage type", {{"stream", true}, {"stream_options", {{"include_usage", 1}}}},
       "stream_options.include_usage"},
      {"chat_template_kwargs type", {{"chat_template_kwargs", "x"}}, "chat_template_kwargs"},
      {"model type", {{"model", 5}}, "model"},
      {"user type", {{"user", 5}}, "user"},
      // Structured output is refused rather than ignored.
      {"response_format type", {{"response_format", "json"}}, "response_format"},
      {"response_format without type", {{"response_format", Json::object()}}, "response_format.type"},
      {"response_format json_object", {{"response_format", {{"type", "json_object"}}}}, "response_format.type"},
      {"tool_choice required", {{"tool_choice", "required"}}, "tool_choice"},
      {"tool_choice named", {{"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}}}, "tool_choice"},
      {"tool_choice type", {{"tool_choice", 3}}, "tool_choice"},
      {"response_format json_schema",
       {{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}}},
       "response_format.type"},
  };
  for (const BadCase& c : cases) {
    const ApiError error = ChatError(Chat(c.extra));
    EXPECT_EQ(error.status, 400) << c.name;
    EXPECT_EQ(error.type, "invalid_request_error") << c.name;
    EXPECT_EQ(error.param.value_or("<none>"), c.param) << c.name << ": " << error.message;
    EXPECT_FALSE(error.message.empty()) << c.name;
  }
}

// Each request limit (a gateway flag) is a 400 naming the field, the limit and the flag.
TEST(ChatRequestTest, LimitsNameFieldLimitAndFlag) {
  const GenerationLimits limits{.max_n = 8, .vocab_size = 100, .max_tokens = 50, .max_stop_strings = 3,
                                .max_stop_string_bytes = 5, .max_logit_bias = 2};
  Json many_biases = Json::object();
  for (int id = 0; id < 3; ++id) many_biases[std::to_string(id)] = 1;
  struct LimitCase {
    Json extra;
    std::string param;
    std::string words;  // must appear in the message
  };
  const std::vector<LimitCase> cases = {
      {{{"max_tokens", 51}}, "max_tokens", "limit of 50 (--max-tokens-limit)"},
      {{{"max_completion_tokens", 77}}, "max_completion_tokens", "77, above this server's limit of 50"},
      {{{"stop", {"a", "b", "c", "d"}}}, "stop", "4 strings, above this server's limit of 3 (--max-stop-strings)"},
      {{{"stop", {"a", "abcdef"}}}, "stop[1]", "6 bytes is above this server's limit of 5 bytes"},
      {{{"stop", "abcdef"}}, "stop", "(--max-stop-string-bytes)"},
      {{{"logit_bias", many_biases}}, "logit_bias", "3 entries, above this server's limit of 2 (--max-logit-bias)"},
  };
  for (const LimitCase& c : cases) {
    auto parsed = ParseChatCompletionRequest(Chat(c.extra), limits);
    const ApiError* error = std::get_if<ApiError>(&parsed);
    ASSERT_NE(error, nullptr) << c.extra.dump();
    EXPECT_EQ(error->status, 400);
    EXPECT_EQ(error->param.value_or("<none>"), c.param) << error->message;
    EXPECT_NE(error->message.find(c.words), std::string::npos) << error->message;
  }
  // At every limit the request is accepted.
  Json at_limits = Chat({{"max_tokens", 50}, {"stop", {"a", "b", "abcde"}}, {"logit_bias", {{"1", 1}, {"2", 2}}}});
  EXPECT_TRUE(std::holds_alternative<ChatCompletionRequest>(ParseChatCompletionRequest(at_limits, limits)));
}

TEST(ChatRequestTest, BadMessagesNameTheMessage) {
  const std::vector<std::pair<Json, std::string>> cases = {
      {Json::array(), "messages"},
      {"hi", "messages"},
      {Json::array({"hi"}), "messages[0]"},
      {Json::parse(R"([{"content":"x"}])"), "messages[0].role"},
      {Json::parse(R"([{"role":"wizard","content":"x"}])"), "messages[0].role"},
      {Json::parse(R"([{"role":"user","content":"a"},{"role":"user"}])"), "messages[1].content"},
      {Json::parse(R"([{"role":"user","content":5}])"), "messages[0].content"},
      {Json::parse(R"([{"role":"user","content":[{"type":"image_url","image_url":{}}]}])"),
       "messages[0].content[0].type"},
      {Json::parse(R"([{"role":"user","content":[{"type":"text"}]}])"), "messages[0].content[0].text"},
  };
  for (const auto& [messages, param] : cases) {
    Json body = Chat({});
    body["messages"] = messages;
    const ApiError error = ChatError(body);
    EXPECT_EQ(error.status, 400);
    EXPECT_EQ(error.param.value_or("<none>"), param) << messages.dump() << ": " << error.message;
  }
  Json missing = {{"model", "m"}};
  EXPECT_EQ(ChatError(missing).param, "messages");
  // An assistant turn may omit content (tool calls).
  Json body = Chat({});
  body["messages"] = Json::parse(R"([{"role":"user","content":"a"},{"role":"assistant","content":null}])");
  ChatOk(body);
}

TEST(ParseJsonObjectTest, RefusesNonObjects) {
  Json out;
  EXPECT_EQ(ParseJsonObject("{", &out)->param, "body");
  EXPECT_EQ(ParseJsonObject("[1]", &out)->param, "body");
  EXPECT_FALSE(ParseJsonObject(R"({"a":1})", &out).has_value());
}

std::variant<CompletionRequest, ApiError> Completion(Json extra) {
  Json body = {{"model", "m"}, {"prompt", "hello"}};
  for (auto& [key, value] : extra.items()) body[key] = value;
  return ParseCompletionRequest(body, kLimits);
}

TEST(CompletionRequestTest, PromptShapes) {
  auto text = std::get<CompletionRequest>(Completion({}));
  ASSERT_EQ(text.prompts.size(), 1u);
  EXPECT_EQ(text.prompts[0].text, "hello");
  EXPECT_EQ(text.params.max_tokens, 16);  // the completions default
  auto list = std::get<CompletionRequest>(Completion({{"prompt", {"a", "b"}}}));
  ASSERT_EQ(list.prompts.size(), 2u);
  EXPECT_EQ(list.prompts[1].text, "b");
  auto ids = std::get<CompletionRequest>(Completion({{"prompt", {3, 4, 5}}}));
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_TRUE(ids.prompts[0].is_tokens);
  EXPECT_EQ(ids.prompts[0].token_ids, (std::vector<int32_t>{3, 4, 5}));
  auto lists = std::get<CompletionRequest>(Completion({{"prompt", {{3}, {4, 5}}}}));
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(lists.prompts[1].token_ids, (std::vector<int32_t>{4, 5}));
}

TEST(CompletionRequestTest, EchoLogprobsAndMaxTokens) {
  auto r = std::get<CompletionRequest>(Completion({{"echo", true}, {"logprobs", 2}, {"max_tokens", 3}}));
  EXPECT_TRUE(r.echo);
  EXPECT_TRUE(r.params.logprobs);
  EXPECT_EQ(r.params.top_logprobs, 2);
  EXPECT_EQ(r.params.max_tokens, 3);
  auto zero = std::get<CompletionRequest>(Completion({{"logprobs", 0}}));
  EXPECT_TRUE(zero.params.logprobs);
  EXPECT_EQ(zero.params.top_logprobs, 0);
}

TEST(CompletionRequestTest, BadFieldsNameTheField) {
  const std::vector<BadCase> cases = {
      {"suffix", {{"suffix", "tail"}}, "suffix"},
      {"prompt number", {{"prompt", 5}}, "prompt"},
      {"prompt empty list", {{"prompt", Json::array()}}, "prompt"},
      {"prompt mixed", {{"prompt", {"a", 5}}}, "prompt[1]"},
      {"token out of vocab", {{"prompt", {3, 100}}}, "prompt[1]"},
      {"nested token out of vocab", {{"prompt", {{3}, {-1}}}}, "prompt[1][0]"},
      {"logprobs range", {{"logprobs", 21}}, "logprobs"},
      {"echo type", {{"echo", "yes"}}, "echo"},
      {"best_of", {{"best_of", 2}}, "best_of"},
      {"max_tokens", {{"max_tokens", -1}}, "max_tokens"},
      {"response_format json_object", {{"response_format", {{"type", "json_object"}}}}, "response_format.type"},
  };
  for (const BadCase& c : cases) {
    auto parsed = Completion(c.extra);
    ASSERT_TRUE(std::holds_alternative<ApiError>(parsed)) << c.name;
    const ApiError& error = std::get<ApiError>(parsed);
    EXPECT_EQ(error.status, 400) << c.name;
    EXPECT_EQ(error.param.value_or("<none>"), c.param) << c.name << ": " << error.message;
  }
  Json missing = {{"model", "m"}};
  EXPECT_EQ(std::get<ApiError>(ParseCompletionRequest(missing, kLimits)).param, "prompt");
}

TEST(GenerationDefaultsTest, ReadsGenerationConfigAndMergesWithRequest) {
  auto defaults = ParseGenerationDefaults(R"({"top_p":0.8,"temperature":0.8,"repetition_penalty":1.0})", "t");
  ASSERT_TRUE(defaults.ok());
  GenerationParams params;
  params.temperature = 0.2;
  const ernie::v1::SamplingParams sampling = ToSamplingParams(params, *defaults, 12);
  EXPECT_FLOAT_EQ(sampling.temperature(), 0.2f);  // the request wins
  EXPECT_FLOAT_EQ(sampling.top_p(), 0.8f);        // then generation_config.json
  EXPECT_FLOAT_EQ(sampling.repetition_penalty(), 1.0f);
  EXPECT_EQ(sampling.max_tokens(), 12);
  EXPECT_EQ(sampling.n(), 1);
  EXPECT_FALSE(sampling.has_seed());
  auto greedy = ParseGenerationDefaults(R"({"do_sample":false,"temperature":0.7})", "t");
  ASSERT_TRUE(greedy.ok());
  EXPECT_DOUBLE_EQ(*greedy->temperature, 0.0);
  EXPECT_EQ(ParseGenerationDefaults("[1]", "cfg").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseGenerationDefaults(R"({"top_p":"x"})", "cfg").status().code(), absl::StatusCode::kInvalidArgument);
  auto empty = ParseGenerationDefaults("{}", "t");
  const ernie::v1::SamplingParams openai = ToSamplingParams(GenerationParams{}, *empty, 5);
  EXPECT_FLOAT_EQ(openai.temperature(), 1.0f);
  EXPECT_FLOAT_EQ(openai.top_p(), 1.0f);
}

// top_k and max_new_tokens are integers (50.0 counts) in range; the
// openai_request fuzz target found 5.5e100 converted to int64 unchecked
// (undefined behaviour; its input is in tests/fuzz/regressions).
TEST(GenerationDefaultsTest, IntegerKeysMustBeIntegersInRange) {
  auto defaults = ParseGenerationDefaults(R"({"top_k":50.0,"max_new_tokens":128})", "t");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(*defaults->top_k, 50);
  EXPECT_EQ(*defaults->max_new_tokens, 128);
  EXPECT_EQ(ParseGenerationDefaults(R"({"top_k":5.5e100})", "cfg").status().message(),
            "cfg: 'top_k' must be an integer between -1 and 2147483647, got 5.5e+100");
  EXPECT_EQ(ParseGenerationDefaults(R"({"max_new_tokens":1.5})", "cfg").status().message(),
            "cfg: 'max_new_tokens' must be an integer between 0 and 2147483647, got 1.5");
}

}  // namespace
}  // namespace ernie::gateway
