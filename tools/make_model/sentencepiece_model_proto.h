// Just enough of sentencepiece's ModelProto wire format to edit its piece
// list. Debian's sentencepiece ships no sentencepiece_model.pb.h, so instead
// of a second copy of the schema we parse the protobuf encoding directly:
// field 1 (repeated SentencePiece {1: piece, 2: score, 3: type}) is decoded,
// every other top-level field (trainer, normalizer specs...) is carried
// through byte for byte.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ernie::make_model {

// sentencepiece::ModelProto::SentencePiece::Type, same numbers.
enum class PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct PieceEntry {
  std::string piece;
  float score = 0.0f;
  PieceType type = PieceType::kNormal;
};

struct EditableModelProto {
  std::vector<PieceEntry> pieces;  // id order
  std::string other_fields;        // encoded top-level fields other than pieces, in order
};

// InvalidArgument when `serialized` is not a well-formed ModelProto encoding.
absl::StatusOr<EditableModelProto> ParseModelProto(std::string_view serialized);

// Pieces first (as protobuf serialises field 1 first), then the other fields.
std::string SerializeModelProto(const EditableModelProto& proto);

}  // namespace ernie::make_model
