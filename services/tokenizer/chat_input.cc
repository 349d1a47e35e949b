#include "services/tokenizer/chat_input.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "services/common/json_nesting.h"

namespace ernie::tokenizer {
namespace {

using OrderedJson = nlohmann::ordered_json;

absl::StatusOr<OrderedJson> ParseJsonField(const std::string& text, const char* field) {
  // nlohmann parses without recursion, but the chat template's Value::FromJson
  // and json_dump recurse once per level: a messages_json of 500,000 '[' (1 MB,
  // the default --max-input-bytes) would overflow the stack of the RPC thread.
  if (JsonNestsDeeperThan(text, kMaxChatJsonNesting)) {
    return absl::InvalidArgumentError(absl::StrCat("chat.", field, " nests arrays and objects deeper than ",
                                                   kMaxChatJsonNesting, " levels"));
  }
  OrderedJson json = OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError(absl::StrCat("chat.", field, " is not valid JSON"));
  return json;
}

}  // namespace

absl::StatusOr<ChatRequest> ParseChatInput(const ernie::v1::ChatInput& input) {
  ChatRequest request;
  auto messages = ParseJsonField(input.messages_json(), "messages_json");
  if (!messages.ok()) return messages.status();
  if (!messages->is_array()) return absl::InvalidArgumentError("chat.messages_json must be a JSON array");
  request.messages = *std::move(messages);
  if (!input.tools_json().empty()) {
    auto tools = ParseJsonField(input.tools_json(), "tools_json");
    if (!tools.ok()) return tools.status();
    if (!tools->is_array() && !tools->is_null()) {
      return absl::InvalidArgumentError("chat.tools_json must be a JSON array");
    }
    if (!tools->is_null()) request.tools = *std::move(tools);
  }
  if (!input.chat_template_kwargs_json().empty()) {
    auto kwargs = ParseJsonField(input.chat_template_kwargs_json(), "chat_template_kwargs_json");
    if (!kwargs.ok()) return kwargs.status();
    if (!kwargs->is_object()) {
      return absl::InvalidArgumentError("chat.chat_template_kwargs_json must be a JSON object");
    }
    request.kwargs = *std::move(kwargs);
  }
  request.add_generation_prompt = input.add_generation_prompt();
  request.template_name = input.template_name();
  return request;
}

}  // namespace ernie::tokenizer
