#include "tools/make_model/tokenizer_maker.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/util/status_macros.h"
#include "tools/make_model/ernie_special_tokens.h"
#include "tools/make_model/sentencepiece_bridge.h"
#include "tools/make_model/sentencepiece_model_proto.h"

namespace ernie::make_model {
namespace {

std::string TrainerArgs(const TokenizerOptions& options) {
  std::vector<std::string> digits;
  for (int d = 0; d <= 9; ++d) digits.push_back(absl::StrCat(d));
  return absl::StrCat(
      "--model_type=bpe --vocab_size=", options.trained_vocab_size,
      " --character_coverage=1.0 --byte_fallback=true --split_digits=true",
      // User-defined symbols take the ids right after the meta pieces (3..12),
      // and the 256 byte pieces come next (13..268), as in ERNIE's model.
      " --user_defined_symbols=", absl::StrJoin(digits, ","),
      " --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1",
      " --unk_piece=<unk> --bos_piece=<s> --eos_piece=</s>",
      // Text goes in as written: no NFKC, no dummy prefix, spaces kept.
      " --normalization_rule_name=identity --add_dummy_prefix=false",
      " --remove_extra_whitespaces=false --allow_whitespace_only_pieces=true",
      " --split_by_whitespace=true --max_sentence_length=16384",
      " --input_sentence_size=0 --shuffle_input_sentence=false --num_threads=1",
      " --hard_vocab_limit=false");
}

// Checks what the trainer produced against the ids ERNIE fixes.
absl::Status CheckTrainedLayout(const EditableModelProto& proto) {
  const auto& p = proto.pieces;
  auto fail = [](const std::string& what) {
    return absl::InternalError(absl::StrCat("trained tokenizer has an unexpected layout: ", what));
  };
  if (p.size() < static_cast<size_t>(kFirstNormalPieceId)) {
    return fail(absl::StrCat("only ", p.size(), " pieces"));
  }
  if (p[kUnkId].piece != "<unk>" || p[kUnkId].type != PieceType::kUnknown) return fail("id 0 is not <unk>");
  if (p[kBosId].piece != "<s>" || p[kEosId].piece != "</s>") return fail("ids 1-2 are not <s> </s>");
  for (int d = 0; d <= 9; ++d) {
    if (p[kFirstDigitId + d].piece != absl::StrCat(d)) return fail(absl::StrCat("digit ", d, " misplaced"));
  }
  for (int b = 0; b < 256; ++b) {
    const PieceEntry& e = p[kFirstBytePieceId + b];
    if (e.type != PieceType::kByte) return fail(absl::StrCat("id ", kFirstBytePieceId + b, " is not a byte piece"));
  }
  if (p.size() > static_cast<size_t>(kEndOfSentenceId)) {
    return fail(absl::StrCat(p.size(), " pieces leave no room for <|end_of_sentence|> at ", kEndOfSentenceId));
  }
  return absl::OkStatus();
}

// Unused filler pieces between the trained pieces and the control pieces:
// they hold ids so the specials land where the release has them, and
// sentencepiece never produces an UNUSED piece when encoding.
void AppendFillersAndControls(EditableModelProto& proto) {
  const float filler_score = proto.pieces.back().score - 1.0f;
  for (int id = static_cast<int>(proto.pieces.size()); id < kEndOfSentenceId; ++id) {
    proto.pieces.push_back({absl::StrCat("<unused:", id, ">"), filler_score, PieceType::kUnused});
  }
  for (const SpecialToken& token : SentencePieceControlTokens()) {
    proto.pieces.push_back({token.content, 0.0f, PieceType::kControl});
  }
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReadCorpus(const std::string& corpus_dir) {
  std::error_code error;
  if (!std::filesystem::is_directory(corpus_dir, error)) {
    return absl::NotFoundError(absl::StrCat("tokenizer corpus folder '", corpus_dir, "' does not exist"));
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(corpus_dir, error)) {
    if (entry.is_regular_file() && entry.path().extension() == ".txt") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> sentences;
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read corpus file '", path.string(), "'"));
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) sentences.push_back(line);
    }
  }
  if (sentences.empty()) {
    return absl::NotFoundError(absl::StrCat("tokenizer corpus folder '", corpus_dir, "' has no *.txt text"));
  }
  return sentences;
}

absl::StatusOr<std::string> MakeTokenizerModel(const TokenizerOptions& options) {
  ERNIE_ASSIGN_OR_RETURN(const std::vector<std::string> sentences, ReadCorpus(options.corpus_dir));
  std::string trained;
  std::string error;
  if (!TrainSentencePiece(TrainerArgs(options), sentences, &trained, &error)) {
    return absl::InternalError(absl::StrCat("sentencepiece training failed: ", error));
  }
  ERNIE_ASSIGN_OR_RETURN(EditableModelProto proto, ParseModelProto(trained));
  ERNIE_RETURN_IF_ERROR(CheckTrainedLayout(proto));
  AppendFillersAndControls(proto);
  std::string serialized = SerializeModelProto(proto);

  // Whatever we write must load in sentencepiece itself.
  int piece_count = 0;
  if (!LoadSentencePiece(serialized, &piece_count, &error)) {
    return absl::InternalError(absl::StrCat("edited tokenizer does not load: ", error));
  }
  if (piece_count != kSentencePieceVocabSize) {
    return absl::InternalError(absl::StrCat("edited tokenizer has ", piece_count, " pieces, expected ",
                                            kSentencePieceVocabSize));
  }
  return serialized;
}

}  // namespace ernie::make_model
