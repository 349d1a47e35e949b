#include "gateway/openai/response_json.h"

namespace ernie::gateway {
namespace {

const char* ObjectName(ApiKind kind, bool chunk) {
  if (kind == ApiKind::kChat) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}

OutJson Head(const ResponseHeader& header, bool chunk) {
  return OutJson{{"id", header.id},
                 {"object", ObjectName(header.kind, chunk)},
                 {"created", header.created},
                 {"model", header.model}};
}

OutJson Bytes(const std::string& text) {
  OutJson bytes = OutJson::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace

std::string TokenText(const tokenizer::DetokenizerTable& table, int32_t id) {
  if (id < 0 || id >= table.size()) return "";
  const tokenizer::PieceDecoding& entry = table.entry(id);
  switch (entry.kind) {
    case tokenizer::DecodeKind::kText:
    case tokenizer::DecodeKind::kAdded: return std::string(table.text(entry));
    case tokenizer::DecodeKind::kByte:
      return entry.byte < 0x80 ? std::string(1, static_cast<char>(entry.byte)) : std::string("\xEF\xBF\xBD");
    default: return "";
  }
}

std::string FinishReasonName(ernie::v1::FinishReason reason) {
  switch (reason) {
    case ernie::v1::FINISH_REASON_STOP: return "stop";
    case ernie::v1::FINISH_REASON_LENGTH: return "length";
    case ernie::v1::FINISH_REASON_ABORT: return "abort";
    default: return "";
  }
}

OutJson UsageJson(const UsageCounts& usage) {
  return OutJson{{"prompt_tokens", usage.prompt_tokens},
                 {"completion_tokens", usage.completion_tokens},
                 {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
                 {"prompt_tokens_details", OutJson{{"cached_tokens", usage.cached_tokens}}}};
}

OutJson CompleteResponse(const ResponseHeader& header, const std::vector<FinishedChoice>& choices,
                         const UsageCounts& usage) {
  OutJson out = Head(header, /*chunk=*/false);
  OutJson list = OutJson::array();
  for (const FinishedChoice& choice : choices) {
    OutJson item{{"index", choice.index}};
    if (header.kind == ApiKind::kChat) {
      item["message"] = OutJson{{"role", "assistant"}, {"content", choice.text}};
    } else {
      item["text"] = choice.text;
    }
    item["logprobs"] = choice.logprobs ? *choice.logprobs : OutJson(nullptr);
    item["finish_reason"] = choice.finish_reason;
    list.push_back(std::move(item));
  }
  out["choices"] = std::move(list);
  out["usage"] = UsageJson(usage);
  return out;
}

OutJson ChoiceChunk(const ResponseHeader& header, int index, const std::string& text, bool role_chunk,
                    const std::optional<OutJson>& logprobs, const std::optional<std::string>& finish_reason,
                    bool with_usage_null) {
  OutJson out = Head(header, /*chunk=*/true);
  OutJson choice{{"index", index}};
  if (header.kind == ApiKind::kChat) {
    OutJson delta = OutJson::object();
    if (role_chunk) {
      delta["role"] = "assistant";
      delta["content"] = "";
    } else if (!text.empty()) {
      delta["content"] = text;
    }
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs ? *logprobs : OutJson(nullptr);
  choice["finish_reason"] = finish_reason ? OutJson(*finish_reason) : OutJson(nullptr);
  out["choices"] = OutJson::array({std::move(choice)});
  if (with_usage_null) out["usage"] = nullptr;
  return out;
}

namespace {
std::string DumpJson(const OutJson& json) { return json.dump(-1, ' ', false, OutJson::error_handler_t::replace); }
}  // namespace

TextChunkTemplate::TextChunkTemplate(const ResponseHeader& header, int index, bool with_usage_null) {
  // A marker no header can hold (control characters are escaped as \u00XX in
  // JSON, so its serialized form never occurs outside the text's place).
  const std::string marker = "\x01\x02text\x02\x01";
  const std::string quoted = DumpJson(OutJson(marker));
  const std::string chunk =
      DumpJson(ChoiceChunk(header, index, marker, false, std::nullopt, std::nullopt, with_usage_null));
  const size_t at = chunk.rfind(quoted);
  before_ = chunk.substr(0, at);
  after_ = chunk.substr(at + quoted.size());
}

std::string TextChunkTemplate::Render(const std::string& text) const {
  std::string out;
  out.reserve(before_.size() + text.size() + 8 + after_.size());
  out += before_;
  out += DumpJson(OutJson(text));
  out += after_;
  return out;
}

OutJson UsageChunk(const ResponseHeader& header, const UsageCounts& usage) {
  OutJson out = Head(header, /*chunk=*/true);
  out["choices"] = OutJson::array();
  out["usage"] = UsageJson(usage);
  return out;
}

void AppendChatLogprobs(const tokenizer::DetokenizerTable& table,
                        const google::protobuf::RepeatedPtrField<ernie::v1::TokenLogprob>& tokens,
                        std::optional<OutJson>* logprobs) {
  if (!*logprobs) *logprobs = OutJson{{"content", OutJson::array()}};
  OutJson& content = (**logprobs)["content"];
  for (const ernie::v1::TokenLogprob& token : tokens) {
    const std::string text = TokenText(table, token.token_id());
    OutJson top = OutJson::array();
    for (const ernie::v1::TopLogprob& alternative : token.top()) {
      const std::string alt_text = TokenText(table, alternative.token_id());
      top.push_back(OutJson{{"token", alt_text}, {"logprob", alternative.logprob()}, {"bytes", Bytes(alt_text)}});
    }
    content.push_back(OutJson{
        {"token", text}, {"logprob", token.logprob()}, {"bytes", Bytes(text)}, {"top_logprobs", std::move(top)}});
  }
}

void AppendCompletionLogprobs(const tokenizer::DetokenizerTable& table,
                              const google::protobuf::RepeatedPtrField<ernie::v1::TokenLogprob>& tokens,
                              int64_t* text_offset, std::optional<OutJson>* logprobs) {
  if (!*logprobs) {
    *logprobs = OutJson{{"tokens", OutJson::array()},
                        {"token_logprobs", OutJson::array()},
                        {"top_logprobs", OutJson::array()},
                        {"text_offset", OutJson::array()}};
  }
  OutJson& out = **logprobs;
  for (const ernie::v1::TokenLogprob& token : tokens) {
    const std::string text = TokenText(table, token.token_id());
    out["tokens"].push_back(text);
    out["token_logprobs"].push_back(token.logprob());
    OutJson top = OutJson::object();
    for (const ernie::v1::TopLogprob& alternative : token.top()) {
      top[TokenText(table, alternative.token_id())] = alternative.logprob();
    }
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(*text_offset);
    *text_offset += static_cast<int64_t>(text.size());
  }
}

}  // namespace ernie::gateway
