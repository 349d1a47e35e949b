// Chat templates: the Jinja2 programs Hugging Face models ship in
// tokenizer_config.json, rendered byte for byte as transformers'
// apply_chat_template renders them (jinja2 ImmutableSandboxedEnvironment
// with trim_blocks, lstrip_blocks, loopcontrols, HF's tojson,
// raise_exception and strftime_now).
//
// Parse once, render many times: a ChatTemplate is immutable after Parse
// and Render is const and thread-safe.
//
// Anything outside the supported subset (include, extends, filter blocks,
// unknown filters or tests, ...) fails Parse with an InvalidArgument naming
// the construct and its line and column, never renders a wrong prompt.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ernie::chat_template {

struct Stmt;

class ChatTemplate {
 public:
  static absl::StatusOr<ChatTemplate> Parse(std::string_view source);

  // `context` must be a JSON object; its members are the template's
  // variables. Use ordered_json to keep the key order of tool schemas (a
  // template's tojson writes keys in insertion order, as Python does); the
  // nlohmann::json overload sees keys sorted.
  // Errors: InvalidArgument with the position and message of a runtime
  // error, including the message of a template's raise_exception(...).
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context) const;
  absl::StatusOr<std::string> Render(const nlohmann::json& context) const;

 private:
  using Body = std::vector<std::unique_ptr<Stmt>>;
  explicit ChatTemplate(std::shared_ptr<const Body> body) : body_(std::move(body)) {}

  std::shared_ptr<const Body> body_;  // the parsed program, shared by copies
};

// The variables Hugging Face's apply_chat_template passes to a template.
struct ChatContextInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // OpenAI-style servers (vLLM) default to true for chat completions.
  bool add_generation_prompt = true;
  // Absent tools are passed as None (`tools is defined` but `tools is none`).
  std::optional<nlohmann::ordered_json> tools;
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  // Other special tokens of the tokenizer (cls_token, sep_token, ...).
  nlohmann::ordered_json other_special_tokens = nlohmann::ordered_json::object();
  // chat_template_kwargs: merged at the top level, overriding special tokens.
  nlohmann::ordered_json extra_kwargs = nlohmann::ordered_json::object();
};

// Builds {messages, tools, documents, add_generation_prompt, special tokens...,
// kwargs...}. Fails when messages is not an array, tools not an array, or a
// kwarg would replace messages/tools/documents/add_generation_prompt.
absl::StatusOr<nlohmann::ordered_json> BuildChatContext(const ChatContextInput& input);

}  // namespace ernie::chat_template
