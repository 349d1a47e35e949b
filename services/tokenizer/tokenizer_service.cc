#include "services/tokenizer/tokenizer_service.h"

#include <chrono>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "services/common/grpc_status.h"
#include "services/tokenizer/chat_input.h"
#include "services/tokenizer/decode_stream_reactor.h"

namespace ernie::tokenizer {
namespace {

// Runs `handler` and turns anything it throws into INTERNAL, so no
// exception reaches gRPC.
// Records the call on `metrics` (null: none) by `method`.
grpc::ServerUnaryReactor* FinishWith(grpc::CallbackServerContext* context, TokenizerMetrics* metrics,
                                     TokenizerMethod method, const std::function<absl::Status()>& handler) {
  const auto start = std::chrono::steady_clock::now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status;
  try {
    status = services::ToGrpcStatus(handler());
  } catch (const std::exception& error) {
    status = grpc::Status(grpc::StatusCode::INTERNAL, error.what());
  }
  if (metrics != nullptr)
    metrics->Record(method, status.error_code(),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  reactor->Finish(status);
  return reactor;
}

absl::Status CheckSize(int64_t bytes, int64_t limit, const char* what) {
  if (bytes <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(what, " is ", bytes, " bytes, more than --max-input-bytes ", limit));
}

absl::Status CheckChatSize(const ernie::v1::ChatInput& chat, int64_t limit) {
  const auto bytes = static_cast<int64_t>(chat.messages_json().size() + chat.tools_json().size() +
                                          chat.chat_template_kwargs_json().size());
  return CheckSize(bytes, limit, "chat input");
}

ernie::v1::Vocabulary BuildVocabularyMessage(const Tokenizer& tokenizer) {
  ernie::v1::Vocabulary message;
  const Vocabulary& vocabulary = tokenizer.vocabulary();
  message.mutable_pieces()->Reserve(static_cast<int>(vocabulary.pieces.size()));
  for (const VocabularyPiece& piece : vocabulary.pieces) {
    ernie::v1::VocabularyPiece* out = message.add_pieces();
    out->set_piece(piece.piece);
    out->set_type(static_cast<ernie::v1::VocabularyPiece::Type>(piece.type));
    out->set_special(piece.special);
    out->set_added(piece.added);
  }
  message.set_vocabulary_hash(tokenizer.vocabulary_hash());
  message.set_bos_id(vocabulary.bos_id);
  message.set_add_dummy_prefix(vocabulary.add_dummy_prefix);
  message.set_remove_extra_whitespaces(vocabulary.remove_extra_whitespaces);
  return message;
}

}  // namespace

TokenizerService::TokenizerService(std::shared_ptr<const Tokenizer> tokenizer, TokenizerServiceOptions options)
    : tokenizer_(std::move(tokenizer)), options_(options), vocabulary_message_(BuildVocabularyMessage(*tokenizer_)) {}

grpc::ServerUnaryReactor* TokenizerService::Encode(grpc::CallbackServerContext* context,
                                                   const ernie::v1::EncodeRequest* request,
                                                   ernie::v1::EncodeResponse* response) {
  return FinishWith(context, options_.metrics, TokenizerMethod::kEncode, [&]() -> absl::Status {
    EncodeOptions options{.add_special_tokens = request->add_special_tokens(),
                          .parse_special_tokens = request->parse_special_tokens(),
                          .return_offsets = request->return_offsets()};
    std::string rendered;
    std::string_view text;
    if (request->has_chat()) {
      ERNIE_RETURN_IF_ERROR(CheckChatSize(request->chat(), options_.max_input_bytes));
      absl::StatusOr<ChatRequest> chat = ParseChatInput(request->chat());
      if (!chat.ok()) return chat.status();
      absl::StatusOr<std::string> prompt = tokenizer_->ApplyChatTemplate(*chat);
      if (!prompt.ok()) return prompt.status();
      rendered = *std::move(prompt);
      text = rendered;
      // A rendered prompt's markers are special tokens, as apply_chat_template encodes them.
      options.parse_special_tokens = true;
    } else {
      ERNIE_RETURN_IF_ERROR(CheckSize(static_cast<int64_t>(request->text().size()), options_.max_input_bytes, "text"));
      text = request->text();
    }
    absl::StatusOr<Encoding> encoding = tokenizer_->Encode(text, options);
    if (!encoding.ok()) return encoding.status();
    response->mutable_ids()->Add(encoding->ids.begin(), encoding->ids.end());
    for (const auto& [begin, end] : encoding->offsets) {
      response->add_offsets(begin);
      response->add_offsets(end);
    }
    if (request->has_chat()) response->set_text(std::move(rendered));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TokenizerService::Decode(grpc::CallbackServerContext* context,
                                                   const ernie::v1::DecodeRequest* request,
                                                   ernie::v1::DecodeResponse* response) {
  return FinishWith(context, options_.metrics, TokenizerMethod::kDecode, [&]() -> absl::Status {
    ERNIE_RETURN_IF_ERROR(CheckSize(4 * static_cast<int64_t>(request->ids_size()), options_.max_input_bytes,
                                    "ids (4 bytes per id)"));
    absl::StatusOr<std::string> text = tokenizer_->Decode(request->ids(), request->skip_special_tokens());
    if (!text.ok()) return text.status();
    response->set_text(*std::move(text));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TokenizerService::ApplyChatTemplate(grpc::CallbackServerContext* context,
                                                              const ernie::v1::ApplyChatTemplateRequest* request,
                                                              ernie::v1::ApplyChatTemplateResponse* response) {
  return FinishWith(context, options_.metrics, TokenizerMethod::kApplyChatTemplate, [&]() -> absl::Status {
    ERNIE_RETURN_IF_ERROR(CheckChatSize(request->chat(), options_.max_input_bytes));
    absl::StatusOr<ChatRequest> chat = ParseChatInput(request->chat());
    if (!chat.ok()) return chat.status();
    absl::StatusOr<std::string> prompt = tokenizer_->ApplyChatTemplate(*chat);
    if (!prompt.ok()) return prompt.status();
    if (request->tokenize()) {
      absl::StatusOr<Encoding> encoding = tokenizer_->Encode(*prompt, {.parse_special_tokens = true});
      if (!encoding.ok()) return encoding.status();
      response->mutable_ids()->Add(encoding->ids.begin(), encoding->ids.end());
    }
    response->set_prompt(*std::move(prompt));
    return absl::OkStatus();
  });
}

grpc::ServerBidiReactor<ernie::v1::DecodeStreamRequest, ernie::v1::DecodeStreamResponse>*
TokenizerService::DecodeStream(grpc::CallbackServerContext* /*context*/) {
  return new DecodeStreamReactor(tokenizer_->detokenizer_table(), options_.max_input_bytes);
}

grpc::ServerUnaryReactor* TokenizerService::Info(grpc::CallbackServerContext* context,
                                                 const ernie::v1::InfoRequest* /*request*/,
                                                 ernie::v1::TokenizerInfo* response) {
  return FinishWith(context, options_.metrics, TokenizerMethod::kInfo, [&]() -> absl::Status {
    response->set_vocab_size(tokenizer_->vocab_size());
    for (const SpecialTokenInfo& token : tokenizer_->special_tokens()) {
      ernie::v1::SpecialToken* out = response->add_special_tokens();
      out->set_name(token.name);
      out->set_content(token.content);
      out->set_id(token.id);
    }
    for (int32_t id : tokenizer_->eos_token_ids()) response->add_eos_token_ids(id);
    response->set_has_chat_template(tokenizer_->has_chat_template());
    for (const std::string& name : tokenizer_->template_names()) response->add_template_names(name);
    const int64_t max_length = tokenizer_->model_max_length().value_or(0);
    response->set_model_max_length(static_cast<int32_t>(std::min<int64_t>(max_length, std::numeric_limits<int32_t>::max())));
    response->set_max_input_bytes(
        static_cast<int32_t>(std::min<int64_t>(options_.max_input_bytes, std::numeric_limits<int32_t>::max())));
    response->set_vocabulary_hash(tokenizer_->vocabulary_hash());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TokenizerService::GetVocabulary(grpc::CallbackServerContext* context,
                                                          const ernie::v1::VocabularyRequest* /*request*/,
                                                          ernie::v1::Vocabulary* response) {
  return FinishWith(context, options_.metrics, TokenizerMethod::kGetVocabulary, [&]() -> absl::Status {
    *response = vocabulary_message_;
    return absl::OkStatus();
  });
}

}  // namespace ernie::tokenizer
