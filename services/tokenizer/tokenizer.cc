#include "services/tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/util/status_macros.h"
#include "services/tokenizer/added_token_splitter.h"
#include "services/tokenizer/detokenizer/utf8.h"
#include "services/tokenizer/sentencepiece_bridge.h"
#include "services/tokenizer/sentencepiece_model_info.h"
#include "services/tokenizer/template/chat_template.h"
#include "services/tokenizer/tokenizer_files.h"

namespace ernie::tokenizer {
namespace {

constexpr std::string_view kEndOfSentence = "<|end_of_sentence|>";

absl::StatusOr<std::string> ReadBinaryFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  ERNIE_ASSIGN_OR_RETURN(std::string serialized, ReadBinaryFile(dir / "tokenizer.model"));
  ERNIE_ASSIGN_OR_RETURN(SentencePieceModelInfo info, ReadSentencePieceModelInfo(serialized));
  ERNIE_ASSIGN_OR_RETURN(TokenizerFiles files, ReadTokenizerFiles(model_dir));

  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer());
  auto sentencepiece = SentencePieceModel::Load(serialized);
  if (!sentencepiece.ok()) {
    return absl::Status(sentencepiece.status().code(),
                        absl::StrCat((dir / "tokenizer.model").string(), ": ", sentencepiece.status().message()));
  }
  tokenizer->sentencepiece_ = *std::move(sentencepiece);
  tokenizer->sentencepiece_size_ = tokenizer->sentencepiece_->piece_size();
  if (tokenizer->sentencepiece_size_ != static_cast<int32_t>(info.pieces.size())) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.model: ", info.pieces.size(),
                                                   " pieces on the wire but sentencepiece loaded ",
                                                   tokenizer->sentencepiece_size_));
  }

  // The vocabulary: sentencepiece's pieces, then added tokens (possibly
  // past the model, with gaps left empty).
  Vocabulary& vocabulary = tokenizer->vocabulary_;
  int32_t size = tokenizer->sentencepiece_size_;
  for (const AddedTokenEntry& token : files.added_tokens) size = std::max(size, token.id + 1);
  vocabulary.pieces.resize(static_cast<size_t>(size));
  for (size_t id = 0; id < info.pieces.size(); ++id) {
    vocabulary.pieces[id].piece = info.pieces[id];
    vocabulary.pieces[id].type = info.types[id];
  }
  for (size_t id = info.pieces.size(); id < vocabulary.pieces.size(); ++id) {
    vocabulary.pieces[id].type = PieceType::kUnused;  // a gap until an added token fills it
  }
  for (const AddedTokenEntry& token : files.added_tokens) {
    VocabularyPiece& piece = vocabulary.pieces[static_cast<size_t>(token.id)];
    if (token.id >= tokenizer->sentencepiece_size_) piece.type = PieceType::kUserDefined;
    piece.piece = token.content;
    piece.added = true;
    piece.special = token.special;
    tokenizer->added_token_ids_[token.content] = token.id;
  }
  vocabulary.bos_id = tokenizer->sentencepiece_->bos_id();
  vocabulary.add_dummy_prefix = info.add_dummy_prefix;
  vocabulary.remove_extra_whitespaces = info.remove_extra_whitespaces;

  // Special tokens named by the files are added tokens in transformers too.
  auto mark_special = [&](const std::string& name, const std::string& content) -> absl::Status {
    const std::optional<int32_t> id = tokenizer->TokenToId(content);
    if (!id.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer files: ", name, " '", content, "' is neither an added token nor a piece"));
    }
    VocabularyPiece& piece = vocabulary.pieces[static_cast<size_t>(*id)];
    piece.special = true;
    piece.added = true;
    piece.piece = content;
    tokenizer->added_token_ids_[content] = *id;
    tokenizer->special_tokens_.push_back({name, content, *id});
    return absl::OkStatus();
  };
  for (const auto& [name, content] : files.named_special_tokens) ERNIE_RETURN_IF_ERROR(mark_special(name, content));
  for (const std::string& content : files.additional_special_tokens) {
    ERNIE_RETURN_IF_ERROR(mark_special("additional_special_token", content));
  }

  std::vector<std::pair<std::string, int32_t>> splitter_tokens(tokenizer->added_token_ids_.begin(),
                                                               tokenizer->added_token_ids_.end());
  tokenizer->splitter_ = std::make_unique<AddedTokenSplitter>(splitter_tokens);
  ERNIE_ASSIGN_OR_RETURN(tokenizer->detokenizer_table_, DetokenizerTable::Create(vocabulary));
  tokenizer->vocabulary_hash_ = VocabularyHash(vocabulary);

  tokenizer->add_bos_token_ = files.add_bos_token;
  tokenizer->add_eos_token_ = files.add_eos_token;
  tokenizer->model_max_length_ = files.model_max_length;
  if (auto bos = tokenizer->SpecialToken("bos_token")) tokenizer->bos_id_ = tokenizer->TokenToId(*bos).value_or(-1);
  if (auto eos = tokenizer->SpecialToken("eos_token")) tokenizer->eos_id_ = tokenizer->TokenToId(*eos).value_or(-1);

  std::vector<int32_t>& eos_ids = tokenizer->eos_token_ids_;
  auto add_eos = [&](int32_t id) {
    if (id >= 0 && std::find(eos_ids.begin(), eos_ids.end(), id) == eos_ids.end()) eos_ids.push_back(id);
  };
  add_eos(tokenizer->eos_id_);
  for (int32_t id : files.generation_eos_ids) {
    if (id < 0 || id >= size) {
      return absl::InvalidArgumentError(
          absl::StrCat("generation_config.json: eos_token_id ", id, " is outside the vocabulary (size ", size, ")"));
    }
    add_eos(id);
  }
  if (auto end_of_sentence = tokenizer->TokenToId(kEndOfSentence)) add_eos(*end_of_sentence);

  for (const NamedChatTemplate& source : files.chat_templates) {
    auto parsed = chat_template::ChatTemplate::Parse(source.source);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("chat template '", source.name, "': ", parsed.status().message()));
    }
    tokenizer->templates_.emplace_back(
        source.name, std::make_shared<const chat_template::ChatTemplate>(*std::move(parsed)));
  }
  return tokenizer;
}

std::string_view Tokenizer::IdToPiece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return vocabulary_.pieces[static_cast<size_t>(id)].piece;
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view content) const {
  if (auto it = added_token_ids_.find(content); it != added_token_ids_.end()) return it->second;
  const int id = sentencepiece_->PieceToId(std::string(content));
  if (id >= 0 && id < sentencepiece_size_ && vocabulary_.pieces[static_cast<size_t>(id)].piece == content) return id;
  return std::nullopt;
}

std::optional<std::string> Tokenizer::SpecialToken(std::string_view name) const {
  for (const SpecialTokenInfo& token : special_tokens_) {
    if (token.name == name) return token.content;
  }
  return std::nullopt;
}

std::vector<std::string> Tokenizer::template_names() const {
  std::vector<std::string> names;
  for (const auto& [name, parsed] : templates_) names.push_back(name);
  return names;
}

absl::Status Tokenizer::EncodePlain(std::string_view text, int offset_base, Encoding* out, bool with_offsets) const {
  std::vector<int> ids;
  std::vector<std::pair<int, int>> offsets;
  ERNIE_RETURN_IF_ERROR(
      sentencepiece_->Encode(std::string(text), offset_base, &ids, with_offsets ? &offsets : nullptr));
  out->ids.insert(out->ids.end(), ids.begin(), ids.end());
  for (const auto& [begin, end] : offsets) out->offsets.emplace_back(begin, end);
  return absl::OkStatus();
}

absl::StatusOr<Encoding> Tokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  if (const size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 (byte offset ", bad, ")"));
  }
  Encoding encoding;
  const bool with_offsets = options.return_offsets;
  if (options.add_special_tokens && add_bos_token_ && bos_id_ >= 0) {
    encoding.ids.push_back(bos_id_);
    if (with_offsets) encoding.offsets.emplace_back(0, 0);
  }
  if (options.parse_special_tokens) {
    for (const AddedTokenSplitter::Segment& segment : splitter_->Split(text)) {
      if (segment.token_id >= 0) {
        encoding.ids.push_back(segment.token_id);
        if (with_offsets) encoding.offsets.emplace_back(segment.begin, segment.end);
      } else {
        ERNIE_RETURN_IF_ERROR(EncodePlain(text.substr(segment.begin, segment.end - segment.begin),
                                          static_cast<int>(segment.begin), &encoding, with_offsets));
      }
    }
  } else {
    ERNIE_RETURN_IF_ERROR(EncodePlain(text, 0, &encoding, with_offsets));
  }
  if (options.add_special_tokens && add_eos_token_ && eos_id_ >= 0) {
    encoding.ids.push_back(eos_id_);
    const auto end = static_cast<int32_t>(text.size());
    if (with_offsets) encoding.offsets.emplace_back(end, end);
  }
  return encoding;
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids, bool skip_special_tokens) const {
  std::string text;
  std::vector<int> run;  // sentencepiece ids since the last added token
  auto flush_run = [&]() -> absl::Status {
    if (run.empty()) return absl::OkStatus();
    ERNIE_ASSIGN_OR_RETURN(std::string decoded, sentencepiece_->Decode(run));
    text += decoded;
    run.clear();
    return absl::OkStatus();
  };
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary (ids 0..", vocab_size() - 1, ")"));
    }
    const VocabularyPiece& piece = vocabulary_.pieces[static_cast<size_t>(id)];
    if (piece.piece.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " has no token in this vocabulary"));
    }
    if (piece.special && skip_special_tokens) continue;
    if (piece.added) {
      ERNIE_RETURN_IF_ERROR(flush_run());
      text += piece.piece;
    } else {
      run.push_back(id);
    }
  }
  ERNIE_RETURN_IF_ERROR(flush_run());
  return text;
}

absl::StatusOr<std::string> Tokenizer::ApplyChatTemplate(const ChatRequest& request) const {
  if (templates_.empty()) return absl::FailedPreconditionError("the tokenizer has no chat template");
  const chat_template::ChatTemplate* chosen = nullptr;
  const std::string wanted = request.template_name.empty() ? "default" : request.template_name;
  for (const auto& [name, parsed] : templates_) {
    if (name == wanted) chosen = parsed.get();
  }
  if (chosen == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown chat template '", wanted, "' (this tokenizer has: ",
                                                   absl::StrJoin(template_names(), ", "), ")"));
  }
  chat_template::ChatContextInput input;
  input.messages = request.messages;
  input.add_generation_prompt = request.add_generation_prompt;
  input.tools = request.tools;
  input.extra_kwargs = request.kwargs;
  nlohmann::ordered_json additional = nlohmann::ordered_json::array();
  for (const SpecialTokenInfo& token : special_tokens_) {
    if (token.name == "bos_token") {
      input.bos_token = token.content;
    } else if (token.name == "eos_token") {
      input.eos_token = token.content;
    } else if (token.name == "additional_special_token") {
      additional.push_back(token.content);
    } else {
      input.other_special_tokens[token.name] = token.content;
    }
  }
  if (!additional.empty()) input.other_special_tokens["additional_special_tokens"] = std::move(additional);
  try {
    ERNIE_ASSIGN_OR_RETURN(nlohmann::ordered_json context, chat_template::BuildChatContext(input));
    return chosen->Render(context);
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("chat template: ", error.what()));
  }
}

}  // namespace ernie::tokenizer
