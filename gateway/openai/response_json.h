// The JSON bodies the gateway answers with, in OpenAI's shapes: complete
// responses, stream chunks, usage and logprobs for chat and completions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ernie/v1/worker.pb.h"
#include "nlohmann/json.hpp"
#include "services/tokenizer/detokenizer/detokenizer_table.h"

namespace ernie::gateway {

using OutJson = nlohmann::ordered_json;

enum class ApiKind { kChat, kCompletion };

// What every chunk and response of one request shares.
struct ResponseHeader {
  ApiKind kind = ApiKind::kChat;
  std::string id;      // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0; // Unix seconds
  std::string model;
};

struct UsageCounts {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
};

// One finished choice of a complete (non-streamed) response.
struct FinishedChoice {
  int index = 0;
  std::string text;
  std::string finish_reason;  // "stop", "length", "abort"
  std::optional<OutJson> logprobs;  // in the shape of the API kind, or none
};

OutJson UsageJson(const UsageCounts& usage);
OutJson CompleteResponse(const ResponseHeader& header, const std::vector<FinishedChoice>& choices,
                         const UsageCounts& usage);

// A stream chunk for one choice. Chat: `role_chunk` makes the delta
// {"role":"assistant","content":""}; otherwise {"content": text} (or {} when
// text is empty). `with_usage_null` adds "usage": null, as OpenAI does in
// every chunk when stream_options.include_usage is set.
OutJson ChoiceChunk(const ResponseHeader& header, int index, const std::string& text, bool role_chunk,
                    const std::optional<OutJson>& logprobs, const std::optional<std::string>& finish_reason,
                    bool with_usage_null);
// The serialized ChoiceChunk of a choice whose chunk carries only text (no
// role, logprobs or finish reason): what nearly every streamed token is. It
// is rendered from the bytes around the text, cut once from a real chunk, so
// it cannot drift from ChoiceChunk; building and dumping the object for every
// token was ~1/16 of the gateway's CPU a token.
class TextChunkTemplate {
 public:
  TextChunkTemplate(const ResponseHeader& header, int index, bool with_usage_null);
  // == ChoiceChunk(header, index, text, false, {}, {}, with_usage_null)
  //      .dump(-1, ' ', false, OutJson::error_handler_t::replace).
  // Chat: `text` must not be empty (that chunk's delta is {}).
  std::string Render(const std::string& text) const;

 private:
  std::string before_;  // up to the text's opening quote
  std::string after_;   // from after its closing quote
};

// The last chunk of a stream with include_usage: choices [] and the usage.
OutJson UsageChunk(const ResponseHeader& header, const UsageCounts& usage);

// "stop", "length", "abort"; "" while running.
std::string FinishReasonName(ernie::v1::FinishReason reason);

// Logprobs of a run of tokens, appended to `*logprobs` (created on first
// use). Chat: {"content": [{token, logprob, bytes, top_logprobs}]};
// completions: {tokens, token_logprobs, top_logprobs, text_offset}, with
// `text_offset` counting from `text_offset_base`.
void AppendChatLogprobs(const tokenizer::DetokenizerTable& table,
                        const google::protobuf::RepeatedPtrField<ernie::v1::TokenLogprob>& tokens,
                        std::optional<OutJson>* logprobs);
void AppendCompletionLogprobs(const tokenizer::DetokenizerTable& table,
                              const google::protobuf::RepeatedPtrField<ernie::v1::TokenLogprob>& tokens,
                              int64_t* text_offset, std::optional<OutJson>* logprobs);

// A token's own text for logprobs (a lone byte piece: the byte, or U+FFFD
// when it is not ASCII) and its bytes.
std::string TokenText(const tokenizer::DetokenizerTable& table, int32_t id);

}  // namespace ernie::gateway
