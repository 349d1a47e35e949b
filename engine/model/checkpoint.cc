#include "engine/model/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <span>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/safetensors.h"
#include "engine/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace ernie {

namespace fs = std::filesystem;

namespace {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Shard file names from an index, each checked to be a plain file name.
absl::StatusOr<std::set<std::string>> ReadIndex(const std::string& index_path,
                                                std::map<std::string, std::string>* weight_map) {
  ERNIE_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(index_path));
  auto index = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object())
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": not a JSON object"));
  auto wm = index.find("weight_map");
  if (wm == index.end() || !wm->is_object())
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": missing object 'weight_map'"));
  std::set<std::string> shards;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string())
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map['", it.key(), "'] is not a file name"));
    std::string shard = it->get<std::string>();
    // Shards live beside the index; a path that climbs out is refused.
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": bad shard name '", shard, "'"));
    (*weight_map)[it.key()] = shard;
    shards.insert(shard);
  }
  if (shards.empty()) return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map is empty"));
  return shards;
}

}  // namespace

absl::Status Checkpoint::AddFile(const std::string& file_name) {
  const std::string path = (fs::path(dir_) / file_name).string();
  ERNIE_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path, MappedFile::PageIn::kByCaller));
  ERNIE_ASSIGN_OR_RETURN(SafetensorsContents contents, ParseSafetensors(file.bytes(), path));
  for (auto& [name, view] : contents.tensors) {
    auto [it, inserted] = tensors_.emplace(name, view);
    if (!inserted)
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", name, "' is in both ", it->second.file, " and ", path));
  }
  files_.push_back(std::move(file));  // the mapping's address does not move with the object
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = dir;
  if (!fs::is_directory(dir)) return absl::NotFoundError(absl::StrCat("model directory ", dir, " does not exist"));
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  const std::string single = (fs::path(dir) / "model.safetensors").string();
  if (fs::exists(index_path)) {
    std::map<std::string, std::string> weight_map;
    ERNIE_ASSIGN_OR_RETURN(auto shards, ReadIndex(index_path, &weight_map));
    for (const auto& shard : shards) ERNIE_RETURN_IF_ERROR(ckpt->AddFile(shard));
    for (const auto& [name, shard] : weight_map) {
      auto it = ckpt->tensors_.find(name);
      if (it == ckpt->tensors_.end())
        return absl::InvalidArgumentError(
            absl::StrCat(index_path, ": tensor '", name, "' is listed in ", shard, " but no shard holds it"));
      if (fs::path(it->second.file).filename() != shard)
        return absl::InvalidArgumentError(absl::StrCat(index_path, ": tensor '", name, "' is listed in ", shard,
                                                       " but found in ", it->second.file));
    }
  } else if (fs::exists(single)) {
    ERNIE_RETURN_IF_ERROR(ckpt->AddFile("model.safetensors"));
  } else {
    return absl::NotFoundError(absl::StrCat(dir, ": neither model.safetensors nor model.safetensors.index.json found"));
  }
  ckpt->StartPageIn();
  return ckpt;
}

namespace {

// Where a loader takes a tensor: the embedding first, then layer by layer
// (numerically: the files sort layer 10 before layer 2), then the rest.
std::pair<int64_t, std::string_view> LoadOrderKey(std::string_view name) {
  constexpr std::string_view kLayers = "model.layers.";
  if (name.substr(0, kLayers.size()) == kLayers) {
    int64_t layer = 0;
    size_t i = kLayers.size();
    while (i < name.size() && name[i] >= '0' && name[i] <= '9') layer = layer * 10 + (name[i++] - '0');
    return {layer, name};
  }
  if (name.find("embed_tokens") != std::string_view::npos) return {-1, name};
  return {std::numeric_limits<int64_t>::max(), name};
}

}  // namespace

void Checkpoint::StartPageIn() {
  std::vector<std::pair<std::pair<int64_t, std::string_view>, std::span<const uint8_t>>> order;
  order.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) order.push_back({LoadOrderKey(name), t.bytes});
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::span<const uint8_t>> ranges;
  ranges.reserve(order.size());
  for (const auto& entry : order) ranges.push_back(entry.second);
  page_in_ = std::make_unique<BackgroundPageIn>(ranges);
}

absl::StatusOr<const TensorView*> Checkpoint::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return absl::NotFoundError(absl::StrCat(dir_, ": tensor '", name, "' is missing"));
  return &it->second;
}

absl::StatusOr<const TensorView*> Checkpoint::FindWithShape(const std::string& name,
                                                            const std::vector<int64_t>& shape) const {
  ERNIE_ASSIGN_OR_RETURN(const TensorView* t, Find(name));
  if (t->shape != shape)
    return absl::InvalidArgumentError(absl::StrCat(t->file, ": tensor '", name, "' has shape ",
                                                   ShapeToString(t->shape), ", expected ", ShapeToString(shape)));
  return t;
}

int64_t Checkpoint::total_bytes() const {
  int64_t n = 0;
  for (const auto& [name, t] : tensors_) n += static_cast<int64_t>(t.bytes.size());
  return n;
}

}  // namespace ernie
