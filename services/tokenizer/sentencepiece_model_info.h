// What the tokenizer needs from tokenizer.model's ModelProto that
// sentencepiece's processor API does not expose: each piece's type
// (user-defined included) and the normalizer's whitespace flags. Read from
// the protobuf wire format directly; Debian ships no sentencepiece .pb.h.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/tokenizer/detokenizer/vocabulary.h"

namespace ernie::tokenizer {

struct SentencePieceModelInfo {
  std::vector<std::string> pieces;  // indexed by id
  std::vector<PieceType> types;     // indexed by id
  bool add_dummy_prefix = true;     // proto2 defaults of NormalizerSpec
  bool remove_extra_whitespaces = true;
};

// InvalidArgument when `serialized_model` is not a ModelProto.
absl::StatusOr<SentencePieceModelInfo> ReadSentencePieceModelInfo(const std::string& serialized_model);

}  // namespace ernie::tokenizer
