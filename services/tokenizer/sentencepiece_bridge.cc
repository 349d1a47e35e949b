#include "services/tokenizer/sentencepiece_bridge.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "services/tokenizer/sentencepiece_shim_api.h"

namespace ernie::tokenizer {
namespace {

constexpr const char* kShimFileName = "libernie_sentencepiece_shim.so";

std::vector<std::string> ShimCandidates() {
  std::vector<std::string> candidates;
  if (const char* path = std::getenv("ERNIE_SENTENCEPIECE_SHIM"); path != nullptr && *path != '\0') {
    candidates.emplace_back(path);
  }
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) candidates.push_back((exe.parent_path() / kShimFileName).string());
  candidates.emplace_back(ERNIE_SENTENCEPIECE_SHIM_PATH);
  return candidates;
}

// Loads the shim once per process; the module is never unloaded.
absl::StatusOr<const SentencePieceShimApi*> ShimApi() {
  static std::once_flag once;
  static absl::StatusOr<const SentencePieceShimApi*> api = absl::UnknownError("unset");
  std::call_once(once, [] {
    std::string tried;
    for (const std::string& path : ShimCandidates()) {
      if (!std::filesystem::exists(path)) {
        absl::StrAppend(&tried, "\n  ", path, ": no such file");
        continue;
      }
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (handle == nullptr) {
        absl::StrAppend(&tried, "\n  ", path, ": ", dlerror());
        continue;
      }
      using EntryPoint = const SentencePieceShimApi* (*)();
      auto entry = reinterpret_cast<EntryPoint>(dlsym(handle, "ErnieSentencePieceShimApi"));
      if (entry == nullptr || entry()->abi_version != kSentencePieceShimAbiVersion) {
        absl::StrAppend(&tried, "\n  ", path, ": not a matching ernie sentencepiece shim");
        continue;
      }
      api = entry();
      return;
    }
    api = absl::FailedPreconditionError(absl::StrCat("cannot load ", kShimFileName, "; tried:", tried));
  });
  return api;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SentencePieceModel>> SentencePieceModel::Load(const std::string& serialized_model) {
  absl::StatusOr<const SentencePieceShimApi*> api = ShimApi();
  if (!api.ok()) return api.status();
  std::string error;
  void* processor = (*api)->load(serialized_model, &error);
  if (processor == nullptr) return absl::InvalidArgumentError(absl::StrCat("sentencepiece: ", error));
  return std::unique_ptr<SentencePieceModel>(new SentencePieceModel(*api, processor));
}

SentencePieceModel::~SentencePieceModel() { api_->destroy(processor_); }

int SentencePieceModel::piece_size() const { return api_->piece_size(processor_); }
std::string SentencePieceModel::IdToPiece(int id) const {
  std::string piece;
  api_->id_to_piece(processor_, id, &piece);
  return piece;
}
int SentencePieceModel::PieceToId(const std::string& piece) const { return api_->piece_to_id(processor_, piece); }
int SentencePieceModel::unk_id() const { return api_->unk_id(processor_); }
int SentencePieceModel::bos_id() const { return api_->bos_id(processor_); }

absl::Status SentencePieceModel::Encode(const std::string& text, int offset_base, std::vector<int>* ids,
                                        std::vector<std::pair<int, int>>* offsets) const {
  std::string error;
  if (!api_->encode(processor_, text, offset_base, ids, offsets, &error)) {
    return absl::InternalError(absl::StrCat("sentencepiece encode failed: ", error));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SentencePieceModel::Decode(const std::vector<int>& ids) const {
  std::string text, error;
  if (!api_->decode(processor_, ids, &text, &error)) {
    return absl::InternalError(absl::StrCat("sentencepiece decode failed: ", error));
  }
  return text;
}

}  // namespace ernie::tokenizer
