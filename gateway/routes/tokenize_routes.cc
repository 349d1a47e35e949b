// POST /tokenize and POST /detokenize in vLLM's shapes.
#include "absl/strings/str_cat.h"
#include "gateway/openai/chat_request.h"
#include "gateway/routes/gateway_app.h"
#include "gateway/upstream/grpc_status_map.h"

namespace ernie::gateway {

void GatewayApp::HandleTokenize(const HttpRequest& request, const std::string& request_id,
                                std::shared_ptr<ResponseChannel> channel) {
  Json body;
  if (auto error = ParseJsonObject(request.body, &body)) return channel->Respond(ErrorResponse(*error));
  if (!tokenizer_->ready()) return channel->Respond(ErrorResponse(ServiceUnavailable("The tokenizer is not ready")));
  FieldReader reader(body);
  const std::string model = reader.String("model").value_or("");
  if (!model.empty() && model != config_.served_model_name) {
    ApiError error = NotFound(absl::StrCat("The model `", model, "` does not exist."), "model_not_found");
    error.param = "model";
    return channel->Respond(ErrorResponse(error));
  }
  const int32_t model_len = max_model_len();
  auto answer = [channel, model_len](absl::StatusOr<std::vector<int32_t>> ids) {
    if (!ids.ok()) return channel->Respond(ErrorResponse(ApiErrorFromStatus(ids.status(), "tokenizer")));
    Json out{{"count", ids->size()}, {"max_model_len", model_len}, {"tokens", *ids}, {"token_strs", nullptr}};
    channel->Respond(HttpResponse{.body = out.dump()});
  };
  if (reader.Get("messages") != nullptr) {
    // The chat form: the same message validation as /v1/chat/completions.
    auto parsed = ParseChatCompletionRequest(body, config_.limits);
    if (auto* error = std::get_if<ApiError>(&parsed)) return channel->Respond(ErrorResponse(*error));
    const ChatCompletionRequest& chat = std::get<ChatCompletionRequest>(parsed);
    ernie::v1::ChatInput input;
    input.set_messages_json(chat.messages.dump(-1, ' ', false, Json::error_handler_t::replace));
    if (chat.tools) input.set_tools_json(chat.tools->dump());
    if (!chat.chat_template_kwargs.empty()) input.set_chat_template_kwargs_json(chat.chat_template_kwargs.dump());
    input.set_add_generation_prompt(chat.add_generation_prompt);
    return tokenizer_->ApplyChatTemplate(input, request_id, answer);
  }
  auto prompt = reader.String("prompt");
  const bool add_special_tokens = reader.Bool("add_special_tokens").value_or(true);
  if (reader.error()) return channel->Respond(ErrorResponse(*reader.error()));
  if (!prompt) return channel->Respond(ErrorResponse(BadField("prompt", "'prompt' or 'messages' is required")));
  tokenizer_->Encode(*prompt, add_special_tokens, request_id, answer);
}

void GatewayApp::HandleDetokenize(const HttpRequest& request, std::shared_ptr<ResponseChannel> channel) {
  Json body;
  if (auto error = ParseJsonObject(request.body, &body)) return channel->Respond(ErrorResponse(*error));
  auto table = tokenizer_->table();
  if (table == nullptr) return channel->Respond(ErrorResponse(ServiceUnavailable("The tokenizer is not ready")));
  FieldReader reader(body);
  auto tokens = reader.IntegerList("tokens", 0, table->size() - 1);
  if (reader.error()) return channel->Respond(ErrorResponse(*reader.error()));
  if (!tokens) return channel->Respond(ErrorResponse(BadField("tokens", "'tokens' is required")));
  absl::StatusOr<std::string> text = table->Decode(*tokens, /*skip_special_tokens=*/false);
  if (!text.ok()) return channel->Respond(ErrorResponse(BadField("tokens", std::string(text.status().message()))));
  channel->Respond(HttpResponse{.body = Json{{"prompt", *text}}.dump(-1, ' ', false, Json::error_handler_t::replace)});
}

}  // namespace ernie::gateway
