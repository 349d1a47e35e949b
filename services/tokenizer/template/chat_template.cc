#include "services/tokenizer/template/chat_template.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "services/tokenizer/template/string_util.h"
#include "services/tokenizer/template/evaluator.h"
#include "services/tokenizer/template/parser.h"

namespace ernie::chat_template {

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(std::string_view source) {
  ERNIE_ASSIGN_OR_RETURN(Body body, ParseTemplate(source));
  return ChatTemplate(std::make_shared<const Body>(std::move(body)));
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) {
    return absl::InvalidArgumentError("chat template context must be a JSON object");
  }
  const Value variables = Value::FromJson(context);
  Evaluator evaluator(variables.as_dict());
  return evaluator.Render(*body_);
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::json& context) const {
  return Render(nlohmann::ordered_json::parse(context.dump()));
}

absl::StatusOr<nlohmann::ordered_json> BuildChatContext(const ChatContextInput& input) {
  if (!input.messages.is_array()) return absl::InvalidArgumentError("chat context: messages must be an array");
  if (input.tools.has_value() && !input.tools->is_array() && !input.tools->is_null()) {
    return absl::InvalidArgumentError("chat context: tools must be an array");
  }
  if (!input.other_special_tokens.is_object() || !input.extra_kwargs.is_object()) {
    return absl::InvalidArgumentError("chat context: special tokens and kwargs must be JSON objects");
  }
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = input.messages;
  context["tools"] = input.tools.has_value() ? *input.tools : nlohmann::ordered_json(nullptr);
  context["documents"] = nullptr;
  context["add_generation_prompt"] = input.add_generation_prompt;
  if (input.bos_token.has_value()) context["bos_token"] = *input.bos_token;
  if (input.eos_token.has_value()) context["eos_token"] = *input.eos_token;
  for (const auto& [key, value] : input.other_special_tokens.items()) context[key] = value;
  for (const auto& [key, value] : input.extra_kwargs.items()) {
    if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt") {
      return absl::InvalidArgumentError(
          Cat("chat context: chat_template_kwargs may not set '", key, "'"));
    }
    context[key] = value;
  }
  return context;
}

}  // namespace ernie::chat_template
