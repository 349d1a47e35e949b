// Sentencepiece, reached through libernie_sentencepiece_shim.so (see
// sentencepiece_shim_api.h for why it is a separately loaded module).
//
// The shim is looked up, in order: $ERNIE_SENTENCEPIECE_SHIM; beside the
// running executable; the build tree's copy (ERNIE_SENTENCEPIECE_SHIM_PATH).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ernie::tokenizer {

struct SentencePieceShimApi;

class SentencePieceModel {
 public:
  // Loads a serialized ModelProto (the bytes of tokenizer.model).
  // FailedPrecondition when the shim cannot be loaded, InvalidArgument when
  // sentencepiece rejects the model.
  static absl::StatusOr<std::unique_ptr<SentencePieceModel>> Load(const std::string& serialized_model);
  ~SentencePieceModel();
  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;

  int piece_size() const;
  std::string IdToPiece(int id) const;
  int PieceToId(const std::string& piece) const;  // the unk id when absent
  int unk_id() const;
  int bos_id() const;  // -1 when the model has none

  // Encodes `text` (valid UTF-8) as sentencepiece does, appending ids and,
  // when `offsets` is given, each piece's [begin, end) byte range in `text`
  // shifted by `offset_base`. Thread-safe (the processor is read-only).
  absl::Status Encode(const std::string& text, int offset_base, std::vector<int>* ids,
                      std::vector<std::pair<int, int>>* offsets) const;

  // Sentencepiece's own DecodeIds (the reference for one run of pieces).
  absl::StatusOr<std::string> Decode(const std::vector<int>& ids) const;

 private:
  SentencePieceModel(const SentencePieceShimApi* api, void* processor) : api_(api), processor_(processor) {}

  const SentencePieceShimApi* api_;  // the shim's functions (the module stays loaded)
  void* processor_;                  // a sentencepiece::SentencePieceProcessor, owned
};

}  // namespace ernie::tokenizer
