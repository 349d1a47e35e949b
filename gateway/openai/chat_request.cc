#include "gateway/openai/chat_request.h"

#include <array>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace ernie::gateway {
namespace {

constexpr std::array<std::string_view, 6> kRoles = {"system", "user", "assistant", "tool", "developer", "function"};

bool KnownRole(std::string_view role) {
  for (std::string_view known : kRoles) {
    if (role == known) return true;
  }
  return false;
}

// Validates one message and returns it with its content as a string.
std::optional<Json> NormalizeMessage(const Json& message, size_t index, FieldReader& reader) {
  const std::string where = absl::StrCat("messages[", index, "]");
  if (!message.is_object()) {
    reader.Fail(where, absl::StrCat("'", where, "' must be an object, got ", JsonTypeName(message)));
    return std::nullopt;
  }
  auto role = message.find("role");
  if (role == message.end() || !role->is_string()) {
    reader.Fail(where + ".role", absl::StrCat("'", where, ".role' is required and must be a string"));
    return std::nullopt;
  }
  const std::string role_name = role->get<std::string>();
  if (!KnownRole(role_name)) {
    reader.Fail(where + ".role", absl::StrCat("'", where, ".role' is '", role_name,
                                              "'; expected one of system, user, assistant, tool, developer"));
    return std::nullopt;
  }
  Json out = message;
  auto content = message.find("content");
  if (content == message.end() || content->is_null()) {
    // Only an assistant turn carrying tool calls may omit its content.
    if (role_name != "assistant") {
      reader.Fail(where + ".content", absl::StrCat("'", where, ".content' is required for role '", role_name, "'"));
      return std::nullopt;
    }
    return out;
  }
  if (content->is_string()) return out;
  if (!content->is_array()) {
    reader.Fail(where + ".content", absl::StrCat("'", where, ".content' must be a string or an array of parts, got ",
                                                 JsonTypeName(*content)));
    return std::nullopt;
  }
  std::string text;
  for (size_t p = 0; p < content->size(); ++p) {
    const Json& part = (*content)[p];
    const std::string part_where = absl::StrCat(where, ".content[", p, "]");
    auto type = part.is_object() ? part.find("type") : part.end();
    if (!part.is_object() || type == part.end() || !type->is_string()) {
      reader.Fail(part_where, absl::StrCat("'", part_where, "' must be an object with a 'type'"));
      return std::nullopt;
    }
    if (type->get<std::string>() != "text") {
      reader.Fail(part_where + ".type", absl::StrCat("content part type '", type->get<std::string>(),
                                                     "' is not supported; this model reads only 'text' parts"));
      return std::nullopt;
    }
    auto part_text = part.find("text");
    if (part_text == part.end() || !part_text->is_string()) {
      reader.Fail(part_where + ".text", absl::StrCat("'", part_where, ".text' must be a string"));
      return std::nullopt;
    }
    if (p > 0) text += "\n";
    text += part_text->get<std::string>();
  }
  out["content"] = text;
  return out;
}

}  // namespace

std::variant<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(const Json& body,
                                                                        const GenerationLimits& limits) {
  FieldReader reader(body);
  ChatCompletionRequest request;
  request.model = reader.String("model").value_or("");
  const Json* messages = reader.Get("messages");
  if (messages == nullptr) {
    reader.Fail("messages", "'messages' is required");
  } else if (!messages->is_array()) {
    reader.Fail("messages", absl::StrCat("'messages' must be an array, got ", JsonTypeName(*messages)));
  } else if (messages->empty()) {
    reader.Fail("messages", "'messages' must contain at least one message");
  } else {
    for (size_t i = 0; i < messages->size() && !reader.error(); ++i) {
      if (auto message = NormalizeMessage((*messages)[i], i, reader)) request.messages.push_back(std::move(*message));
    }
  }
  if (const Json* tools = reader.Get("tools")) {
    if (!tools->is_array()) {
      reader.Fail("tools", absl::StrCat("'tools' must be an array, got ", JsonTypeName(*tools)));
    } else {
      request.tools = *tools;
    }
  }
  // Tool calls are not parsed out of the output (the model's call comes back
  // as text), so a choice that demands a call cannot be honoured: refused.
  if (const Json* choice = reader.Get("tool_choice")) {
    if (!choice->is_string() && !choice->is_object()) {
      reader.Fail("tool_choice", absl::StrCat("'tool_choice' must be a string or an object, got ", JsonTypeName(*choice)));
    } else if (!choice->is_string() || (*choice != "auto" && *choice != "none")) {
      reader.Fail("tool_choice", absl::StrCat("tool_choice ", choice->dump(),
                                              " is not supported: this server does not force or parse tool calls;"
                                              " only \"auto\" and \"none\""));
    }
  }
  if (const Json* kwargs = reader.Object("chat_template_kwargs")) request.chat_template_kwargs = *kwargs;
  if (auto add = reader.Bool("add_generation_prompt")) request.add_generation_prompt = *add;

  ReadGenerationParams(reader, limits, {"max_completion_tokens", "max_tokens"}, &request.params);
  if (auto logprobs = reader.Bool("logprobs")) request.params.logprobs = *logprobs;
  if (auto top = reader.Integer("top_logprobs", 0, limits.max_logprobs)) {
    request.params.top_logprobs = static_cast<int>(*top);
    if (*top > 0 && !request.params.logprobs) {
      reader.Fail("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
    }
  }
  if (reader.error()) return *reader.error();
  return request;
}

}  // namespace ernie::gateway
