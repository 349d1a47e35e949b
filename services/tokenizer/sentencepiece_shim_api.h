// The C entry point of libernie_sentencepiece_shim.so (std types only).
//
// Why a separately loaded module: Debian's libsentencepiece.so carries its
// own protobuf-lite and exports those google::protobuf symbols. Linked into
// a process that also has libprotobuf.so (every gRPC service) the two
// copies interpose on each other and the process crashes during static
// initialisation. The shim links sentencepiece alone and is dlopen()ed with
// RTLD_LOCAL | RTLD_DEEPBIND, so sentencepiece resolves to its own protobuf
// and nothing of it enters the global symbol scope.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ernie::tokenizer {

struct SentencePieceShimApi {
  int abi_version;  // kSentencePieceShimAbiVersion
  void* (*load)(const std::string& serialized_model, std::string* error);  // null on error
  void (*destroy)(void* processor);
  int (*piece_size)(const void* processor);
  void (*id_to_piece)(const void* processor, int id, std::string* piece);
  int (*piece_to_id)(const void* processor, const std::string& piece);
  int (*unk_id)(const void* processor);
  int (*bos_id)(const void* processor);
  // Appends ids (and [begin, end) byte offsets + offset_base when offsets is non-null).
  bool (*encode)(const void* processor, const std::string& text, int offset_base, std::vector<int>* ids,
                 std::vector<std::pair<int, int>>* offsets, std::string* error);
  bool (*decode)(const void* processor, const std::vector<int>& ids, std::string* text, std::string* error);
};

inline constexpr int kSentencePieceShimAbiVersion = 1;

}  // namespace ernie::tokenizer

// Exported by the shim module.
extern "C" const ernie::tokenizer::SentencePieceShimApi* ErnieSentencePieceShimApi();
