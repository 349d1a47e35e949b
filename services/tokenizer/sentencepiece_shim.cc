// libernie_sentencepiece_shim.so: the only code that includes sentencepiece
// headers. No absl here (sentencepiece's headers clash with Debian abseil's)
// and no protobuf (see sentencepiece_shim_api.h).
#include <sentencepiece_processor.h>

#include "services/tokenizer/sentencepiece_shim_api.h"

namespace ernie::tokenizer {
namespace {

using sentencepiece::SentencePieceProcessor;

const SentencePieceProcessor& Processor(const void* processor) {
  return *static_cast<const SentencePieceProcessor*>(processor);
}

void* Load(const std::string& serialized_model, std::string* error) {
  auto* processor = new SentencePieceProcessor();
  const sentencepiece::util::Status status = processor->LoadFromSerializedProto(serialized_model);
  if (!status.ok()) {
    *error = status.ToString();
    delete processor;
    return nullptr;
  }
  return processor;
}

void Destroy(void* processor) { delete static_cast<SentencePieceProcessor*>(processor); }
int PieceSize(const void* processor) { return Processor(processor).GetPieceSize(); }
void IdToPiece(const void* processor, int id, std::string* piece) { *piece = Processor(processor).IdToPiece(id); }
int PieceToId(const void* processor, const std::string& piece) { return Processor(processor).PieceToId(piece); }
int UnkId(const void* processor) { return Processor(processor).unk_id(); }
int BosId(const void* processor) { return Processor(processor).bos_id(); }

bool Encode(const void* processor, const std::string& text, int offset_base, std::vector<int>* ids,
            std::vector<std::pair<int, int>>* offsets, std::string* error) {
  if (offsets == nullptr) {
    std::vector<int> piece_ids;
    const sentencepiece::util::Status status = Processor(processor).Encode(text, &piece_ids);
    if (!status.ok()) {
      *error = status.ToString();
      return false;
    }
    ids->insert(ids->end(), piece_ids.begin(), piece_ids.end());
    return true;
  }
  const sentencepiece::ImmutableSentencePieceText result = Processor(processor).EncodeAsImmutableProto(text);
  if (result.pieces_size() == 0 && !text.empty()) {
    *error = "sentencepiece produced no pieces for non-empty text";
    return false;
  }
  for (size_t i = 0; i < result.pieces_size(); ++i) {
    const auto piece = result.pieces(static_cast<int>(i));
    ids->push_back(static_cast<int>(piece.id()));
    offsets->emplace_back(offset_base + static_cast<int>(piece.begin()), offset_base + static_cast<int>(piece.end()));
  }
  return true;
}

bool Decode(const void* processor, const std::vector<int>& ids, std::string* text, std::string* error) {
  const sentencepiece::util::Status status = Processor(processor).Decode(ids, text);
  if (!status.ok()) {
    *error = status.ToString();
    return false;
  }
  return true;
}

constexpr SentencePieceShimApi kApi = {kSentencePieceShimAbiVersion, Load, Destroy, PieceSize, IdToPiece,
                                       PieceToId, UnkId, BosId, Encode, Decode};

}  // namespace
}  // namespace ernie::tokenizer

extern "C" __attribute__((visibility("default"))) const ernie::tokenizer::SentencePieceShimApi*
ErnieSentencePieceShimApi() {
  return &ernie::tokenizer::kApi;
}
