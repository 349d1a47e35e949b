#include "services/tokenizer/sentencepiece_model_info.h"

#include <google/protobuf/unknown_field_set.h>

#include "absl/strings/str_cat.h"

namespace ernie::tokenizer {
namespace {

using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// Field numbers of sentencepiece_model.proto.
constexpr int kModelPieces = 1;           // ModelProto.pieces (repeated SentencePiece)
constexpr int kModelNormalizerSpec = 3;   // ModelProto.normalizer_spec
constexpr int kPieceText = 1;             // SentencePiece.piece
constexpr int kPieceType = 3;             // SentencePiece.type
constexpr int kAddDummyPrefix = 3;        // NormalizerSpec.add_dummy_prefix
constexpr int kRemoveExtraWhitespaces = 4;  // NormalizerSpec.remove_extra_whitespaces

// SentencePiece.Type values on the wire (NORMAL = 1 is the default).
absl::StatusOr<PieceType> ToPieceType(uint64_t wire_type, size_t id) {
  switch (wire_type) {
    case 1: return PieceType::kNormal;
    case 2: return PieceType::kUnknown;
    case 3: return PieceType::kControl;
    case 4: return PieceType::kUserDefined;
    case 5: return PieceType::kUnused;
    case 6: return PieceType::kByte;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.model: piece ", id, " has unknown type ", wire_type));
  }
}

}  // namespace

absl::StatusOr<SentencePieceModelInfo> ReadSentencePieceModelInfo(const std::string& serialized_model) {
  UnknownFieldSet model;
  if (!model.ParseFromString(serialized_model)) {
    return absl::InvalidArgumentError("tokenizer.model: not a sentencepiece ModelProto (protobuf parse failed)");
  }
  SentencePieceModelInfo info;
  for (int i = 0; i < model.field_count(); ++i) {
    const UnknownField& field = model.field(i);
    if (field.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    if (field.number() == kModelPieces) {
      UnknownFieldSet piece;
      const size_t id = info.pieces.size();
      if (!piece.ParseFromString(field.length_delimited())) {
        return absl::InvalidArgumentError(absl::StrCat("tokenizer.model: piece ", id, " does not parse"));
      }
      std::string text;
      PieceType type = PieceType::kNormal;
      for (int j = 0; j < piece.field_count(); ++j) {
        const UnknownField& piece_field = piece.field(j);
        if (piece_field.number() == kPieceText && piece_field.type() == UnknownField::TYPE_LENGTH_DELIMITED) {
          text = piece_field.length_delimited();
        } else if (piece_field.number() == kPieceType && piece_field.type() == UnknownField::TYPE_VARINT) {
          auto parsed = ToPieceType(piece_field.varint(), id);
          if (!parsed.ok()) return parsed.status();
          type = *parsed;
        }
      }
      info.pieces.push_back(std::move(text));
      info.types.push_back(type);
    } else if (field.number() == kModelNormalizerSpec) {
      UnknownFieldSet spec;
      if (!spec.ParseFromString(field.length_delimited())) {
        return absl::InvalidArgumentError("tokenizer.model: normalizer_spec does not parse");
      }
      for (int j = 0; j < spec.field_count(); ++j) {
        const UnknownField& spec_field = spec.field(j);
        if (spec_field.type() != UnknownField::TYPE_VARINT) continue;
        if (spec_field.number() == kAddDummyPrefix) info.add_dummy_prefix = spec_field.varint() != 0;
        if (spec_field.number() == kRemoveExtraWhitespaces) info.remove_extra_whitespaces = spec_field.varint() != 0;
      }
    }
  }
  if (info.pieces.empty()) return absl::InvalidArgumentError("tokenizer.model: the model has no pieces");
  return info;
}

}  // namespace ernie::tokenizer
