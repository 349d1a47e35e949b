// POST /v1/chat/completions and POST /v1/completions: parse, check the
// model, turn the prompt into token ids at the tokenizer service, fit the
// budget to the model length, then hand over to a GenerationJob.
#include <chrono>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "gateway/openai/chat_request.h"
#include "gateway/openai/completion_request.h"
#include "gateway/openai/context_length.h"
#include "gateway/routes/gateway_app.h"
#include "gateway/stream/generation_job.h"
#include "gateway/upstream/grpc_status_map.h"

namespace ernie::gateway {
namespace {

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// 404 for any model but the served one (an empty name means the served one).
std::optional<ApiError> CheckModel(const std::string& requested, const std::string& served) {
  if (requested.empty() || requested == served) return std::nullopt;
  ApiError error = NotFound(absl::StrCat("The model `", requested, "` does not exist."), "model_not_found");
  error.param = "model";
  return error;
}

// 400 when a prompt has more tokens than --max-prompt-tokens allows (0: no
// limit beyond the model length, which ResolveMaxTokens checks).
std::optional<ApiError> CheckPromptTokens(size_t tokens, int64_t limit, const std::string& field) {
  if (limit <= 0 || static_cast<int64_t>(tokens) <= limit) return std::nullopt;
  return BadField(field, absl::StrCat("the prompt has ", tokens, " tokens, above this server's limit of ", limit,
                                      " (--max-prompt-tokens)"));
}

}  // namespace

void GatewayApp::HandleChat(const HttpRequest& request, const std::string& request_id,
                            std::shared_ptr<ResponseChannel> channel) {
  Json body;
  if (auto error = ParseJsonObject(request.body, &body)) return channel->Respond(ErrorResponse(*error));
  GenerationLimits limits = config_.limits;
  if (auto info = workers_->model_info()) limits.vocab_size = info->vocab_size();
  auto parsed = ParseChatCompletionRequest(body, limits);
  if (auto* error = std::get_if<ApiError>(&parsed)) return channel->Respond(ErrorResponse(*error));
  ChatCompletionRequest chat = std::get<ChatCompletionRequest>(std::move(parsed));
  if (auto error = CheckModel(chat.model, config_.served_model_name)) return channel->Respond(ErrorResponse(*error));
  if (!ready()) return channel->Respond(ErrorResponse(ServiceUnavailable("The server is not ready yet: the tokenizer "
                                                                         "or every worker is unavailable")));

  ernie::v1::ChatInput input;
  input.set_messages_json(chat.messages.dump(-1, ' ', false, Json::error_handler_t::replace));
  if (chat.tools) input.set_tools_json(chat.tools->dump());
  if (!chat.chat_template_kwargs.empty()) input.set_chat_template_kwargs_json(chat.chat_template_kwargs.dump());
  input.set_add_generation_prompt(chat.add_generation_prompt);

  GenerationJobSpec spec;
  spec.header = ResponseHeader{.kind = ApiKind::kChat, .id = RandomId("chatcmpl-"), .created = NowSeconds(),
                               .model = config_.served_model_name};
  spec.request_id = request_id;
  spec.params = std::move(chat.params);
  spec.defaults = config_.defaults;
  const int32_t model_len = max_model_len();
  GenerationServices services{.workers = workers_, .table = tokenizer_->table(), .metrics = &metrics_,
                              .timeouts = config_.upstream_timeouts};
  const int64_t prompt_limit = config_.limits.max_prompt_tokens;
  tokenizer_->ApplyChatTemplate(
      input, request_id,
      [spec = std::move(spec), services, model_len, prompt_limit,
       channel](absl::StatusOr<std::vector<int32_t>> ids) mutable {
        if (!ids.ok()) {
          if (services.metrics) services.metrics->UpstreamError("tokenizer", absl::StatusCodeToString(ids.status().code()));
          return channel->Respond(ErrorResponse(ApiErrorFromStatus(ids.status(), "tokenizer")));
        }
        if (auto error = CheckPromptTokens(ids->size(), prompt_limit, "messages")) {
          return channel->Respond(ErrorResponse(*error));
        }
        auto budget = ResolveMaxTokens(static_cast<int64_t>(ids->size()), spec.params.max_tokens, model_len,
                                       spec.defaults.max_new_tokens, "messages");
        if (auto* error = std::get_if<ApiError>(&budget)) return channel->Respond(ErrorResponse(*error));
        spec.prompts.push_back(GenerationPrompt{.token_ids = *std::move(ids), .max_tokens = std::get<int32_t>(budget)});
        StartGenerationJob(std::move(spec), services, channel);
      });
}

namespace {

// Collects the token ids of every prompt of a completions request (some
// need the tokenizer, some are ids already) and starts the job once all
// are known. Shared by the Encode callbacks.
struct PromptGathering {
  std::mutex mutex;
  GenerationJobSpec spec;
  GenerationServices services;
  std::shared_ptr<ResponseChannel> channel;
  int32_t model_len = 0;
  int64_t prompt_limit = 0;  // --max-prompt-tokens
  size_t pending = 0;
  bool failed = false;

  void Finish(size_t index, absl::StatusOr<std::vector<int32_t>> ids) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failed) return;
    if (!ids.ok()) {
      failed = true;
      if (services.metrics) services.metrics->UpstreamError("tokenizer", absl::StatusCodeToString(ids.status().code()));
      return channel->Respond(ErrorResponse(ApiErrorFromStatus(ids.status(), "tokenizer")));
    }
    const std::string field = spec.prompts.size() > 1 ? absl::StrCat("prompt[", index, "]") : "prompt";
    if (auto error = CheckPromptTokens(ids->size(), prompt_limit, field)) {
      failed = true;
      return channel->Respond(ErrorResponse(*error));
    }
    auto budget = ResolveMaxTokens(static_cast<int64_t>(ids->size()), spec.params.max_tokens, model_len,
                                   spec.defaults.max_new_tokens, field);
    if (auto* error = std::get_if<ApiError>(&budget)) {
      failed = true;
      return channel->Respond(ErrorResponse(*error));
    }
    spec.prompts[index].token_ids = *std::move(ids);
    spec.prompts[index].max_tokens = std::get<int32_t>(budget);
    if (--pending == 0) StartGenerationJob(std::move(spec), services, channel);
  }
};

}  // namespace

void GatewayApp::HandleCompletions(const HttpRequest& request, const std::string& request_id,
                                   std::shared_ptr<ResponseChannel> channel) {
  Json body;
  if (auto error = ParseJsonObject(request.body, &body)) return channel->Respond(ErrorResponse(*error));
  GenerationLimits limits = config_.limits;
  if (auto info = workers_->model_info()) limits.vocab_size = info->vocab_size();
  auto parsed = ParseCompletionRequest(body, limits);
  if (auto* error = std::get_if<ApiError>(&parsed)) return channel->Respond(ErrorResponse(*error));
  CompletionRequest completion = std::get<CompletionRequest>(std::move(parsed));
  if (auto error = CheckModel(completion.model, config_.served_model_name)) {
    return channel->Respond(ErrorResponse(*error));
  }
  if (!ready()) return channel->Respond(ErrorResponse(ServiceUnavailable("The server is not ready yet: the tokenizer "
                                                                         "or every worker is unavailable")));
  auto gathering = std::make_shared<PromptGathering>();
  gathering->spec.header = ResponseHeader{.kind = ApiKind::kCompletion, .id = RandomId("cmpl-"),
                                          .created = NowSeconds(), .model = config_.served_model_name};
  gathering->spec.request_id = request_id;
  gathering->spec.params = std::move(completion.params);
  gathering->spec.defaults = config_.defaults;
  gathering->services = GenerationServices{.workers = workers_, .table = tokenizer_->table(), .metrics = &metrics_,
                                             .timeouts = config_.upstream_timeouts};
  gathering->channel = channel;
  gathering->model_len = max_model_len();
  gathering->prompt_limit = config_.limits.max_prompt_tokens;
  gathering->pending = completion.prompts.size();
  gathering->spec.prompts.resize(completion.prompts.size());
  for (size_t i = 0; i < completion.prompts.size(); ++i) {
    const PromptInput& prompt = completion.prompts[i];
    if (completion.echo) {
      if (prompt.is_tokens) {
        gathering->spec.prompts[i].echo_text =
            gathering->services.table->Decode(prompt.token_ids, /*skip_special_tokens=*/false).value_or("");
      } else {
        gathering->spec.prompts[i].echo_text = prompt.text;
      }
    }
  }
  for (size_t i = 0; i < completion.prompts.size(); ++i) {
    PromptInput& prompt = completion.prompts[i];
    if (prompt.is_tokens) {
      gathering->Finish(i, std::move(prompt.token_ids));
    } else {
      tokenizer_->Encode(prompt.text, /*add_special_tokens=*/true, request_id,
                         [gathering, i](absl::StatusOr<std::vector<int32_t>> ids) {
                           gathering->Finish(i, std::move(ids));
                         });
    }
  }
}

}  // namespace ernie::gateway
