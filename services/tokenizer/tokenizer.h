// A Hugging Face model directory's tokenizer: tokenizer.model read as
// transformers' LlamaTokenizer reads it with legacy=True (ERNIE-4.5's
// Ernie4_5_Tokenizer), the added/special tokens of tokenizer_config.json
// and its chat templates.
//
// Encode: with parse_special_tokens every added-token string in the text
// becomes its single id and each stretch of text between them is encoded by
// sentencepiece on its own (legacy behaviour); without it sentencepiece sees
// the whole text. add_special_tokens adds bos/eos as add_bos_token and
// add_eos_token ask.
// Decode: each run of sentencepiece ids between added tokens is decoded by
// sentencepiece (DecodeIds); added tokens decode to their content;
// skip_special_tokens removes special ids first.
//
// Immutable after Load; every method is const and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"
#include "services/tokenizer/detokenizer/detokenizer_table.h"
#include "services/tokenizer/detokenizer/vocabulary.h"

namespace ernie::chat_template {
class ChatTemplate;
}

namespace ernie::tokenizer {

class SentencePieceModel;
class AddedTokenSplitter;

struct EncodeOptions {
  bool add_special_tokens = false;
  bool parse_special_tokens = false;
  bool return_offsets = false;
};

struct Encoding {
  std::vector<int32_t> ids;
  // [begin, end) byte range of each id in the text, when asked; added bos /
  // eos get an empty range at the start / end.
  std::vector<std::pair<int32_t, int32_t>> offsets;
};

struct SpecialTokenInfo {
  std::string name;  // "bos_token", ..., or "additional_special_token"
  std::string content;
  int32_t id = -1;
};

struct ChatRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  std::optional<nlohmann::ordered_json> tools;  // a JSON array, or absent
  bool add_generation_prompt = true;
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
  std::string template_name;  // "" = the default template
};

class Tokenizer {
 public:
  // Reads tokenizer.model and the JSON files of `model_dir` and parses
  // every chat template. NotFound for a missing file, InvalidArgument for a
  // malformed one or a template that does not parse (naming which).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& model_dir);
  ~Tokenizer();

  // InvalidArgument for text that is not valid UTF-8 (naming the offset).
  absl::StatusOr<Encoding> Encode(std::string_view text, const EncodeOptions& options) const;

  // InvalidArgument naming the first id outside the vocabulary.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids, bool skip_special_tokens) const;

  // Renders the chat template with the context transformers'
  // apply_chat_template builds. InvalidArgument for an unknown template name,
  // malformed messages or a render error; FailedPrecondition when the
  // tokenizer has no chat template.
  absl::StatusOr<std::string> ApplyChatTemplate(const ChatRequest& request) const;

  // Every id's piece and decoding class (what GetVocabulary hands out), the
  // table built from it, and its hash.
  const Vocabulary& vocabulary() const { return vocabulary_; }
  const std::shared_ptr<const DetokenizerTable>& detokenizer_table() const { return detokenizer_table_; }
  const std::string& vocabulary_hash() const { return vocabulary_hash_; }

  int32_t vocab_size() const { return static_cast<int32_t>(vocabulary_.pieces.size()); }
  int32_t sentencepiece_size() const { return sentencepiece_size_; }
  // The spelling of `id` (sentencepiece piece or added-token content); ""
  // for an id outside the vocabulary.
  std::string_view IdToPiece(int32_t id) const;
  std::optional<int32_t> TokenToId(std::string_view content) const;

  const std::vector<SpecialTokenInfo>& special_tokens() const { return special_tokens_; }
  // Named special token content ("bos_token" -> "<s>"), if the files set it.
  std::optional<std::string> SpecialToken(std::string_view name) const;
  // eos ids: the eos token, generation_config.json's eos_token_id and
  // <|end_of_sentence|> when the vocabulary has it, deduplicated in that order.
  const std::vector<int32_t>& eos_token_ids() const { return eos_token_ids_; }
  std::vector<std::string> template_names() const;
  bool has_chat_template() const { return !templates_.empty(); }
  std::optional<int64_t> model_max_length() const { return model_max_length_; }

 private:
  Tokenizer();
  absl::Status EncodePlain(std::string_view text, int offset_base, Encoding* out, bool with_offsets) const;

  std::unique_ptr<SentencePieceModel> sentencepiece_;
  std::unique_ptr<AddedTokenSplitter> splitter_;  // over every added token's content
  int32_t sentencepiece_size_ = 0;
  Vocabulary vocabulary_;
  std::shared_ptr<const DetokenizerTable> detokenizer_table_;
  std::string vocabulary_hash_;
  std::map<std::string, int32_t, std::less<>> added_token_ids_;  // content -> id
  std::vector<SpecialTokenInfo> special_tokens_;
  std::vector<int32_t> eos_token_ids_;
  int32_t bos_id_ = -1;  // added by add_special_tokens when add_bos_token
  int32_t eos_id_ = -1;
  bool add_bos_token_ = false;
  bool add_eos_token_ = false;
  std::optional<int64_t> model_max_length_;
  // Parsed chat templates by name, in the files' order; the first is the default.
  std::vector<std::pair<std::string, std::shared_ptr<const chat_template::ChatTemplate>>> templates_;
};

}  // namespace ernie::tokenizer
