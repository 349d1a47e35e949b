#include "engine/model/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace ernie::model {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using UniqueFile = std::unique_ptr<std::FILE, FileCloser>;

absl::Status IoError(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " '", path, "': ", std::strerror(errno)));
}

// Indices of `specs` in file order: sorted by name, as Hugging Face writes them.
std::vector<size_t> FileOrder(std::span<const SafetensorsTensorSpec> specs) {
  std::vector<size_t> order(specs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return specs[a].name < specs[b].name; });
  return order;
}

absl::Status ValidateSpecs(std::span<const SafetensorsTensorSpec> specs) {
  std::set<std::string> seen;
  for (const SafetensorsTensorSpec& spec : specs) {
    if (spec.name.empty()) return absl::InvalidArgumentError("safetensors: a tensor has an empty name");
    if (spec.name == "__metadata__") {
      return absl::InvalidArgumentError("safetensors: '__metadata__' is reserved, not a tensor name");
    }
    if (!seen.insert(spec.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("safetensors: duplicate tensor name '", spec.name, "'"));
    }
    ERNIE_RETURN_IF_ERROR(SafetensorsTensorBytes(spec).status());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<size_t> SafetensorsDtypeSize(const std::string& dtype) {
  if (dtype == "BF16" || dtype == "F16") return 2;
  if (dtype == "F32" || dtype == "I32") return 4;
  return absl::InvalidArgumentError(
      absl::StrCat("safetensors: unsupported dtype '", dtype, "' (expected BF16, F16, F32 or I32)"));
}

absl::StatusOr<uint64_t> SafetensorsTensorBytes(const SafetensorsTensorSpec& spec) {
  ERNIE_ASSIGN_OR_RETURN(const size_t element_bytes, SafetensorsDtypeSize(spec.dtype));
  uint64_t numel = 1;
  for (int64_t dim : spec.shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: tensor '", spec.name, "' has negative dimension ", dim));
    }
    numel *= static_cast<uint64_t>(dim);
  }
  return numel * element_bytes;
}

absl::StatusOr<SafetensorsLayout> PlanSafetensors(std::span<const SafetensorsTensorSpec> specs,
                                                  const std::map<std::string, std::string>& metadata) {
  ERNIE_RETURN_IF_ERROR(ValidateSpecs(specs));
  SafetensorsLayout layout;
  layout.bytes.resize(specs.size());
  std::vector<uint64_t> data_offsets(specs.size());  // from the data section's start
  // nlohmann::json objects are std::maps: keys come out sorted, and
  // "__metadata__" sorts before every lower-case tensor name.
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (size_t index : FileOrder(specs)) {
    const SafetensorsTensorSpec& spec = specs[index];
    ERNIE_ASSIGN_OR_RETURN(layout.bytes[index], SafetensorsTensorBytes(spec));
    data_offsets[index] = offset;
    header[spec.name] = {{"dtype", spec.dtype},
                         {"shape", spec.shape},
                         {"data_offsets", {offset, offset + layout.bytes[index]}}};
    offset += layout.bytes[index];
  }
  layout.header = header.dump();
  // Pad with spaces so the data section (and so every tensor, all sizes
  // being multiples of 2 or 4) starts 8-byte aligned after the 8-byte prefix.
  layout.header.append((8 - layout.header.size() % 8) % 8, ' ');
  const uint64_t data_start = 8 + layout.header.size();
  layout.file_offsets.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) layout.file_offsets[i] = data_start + data_offsets[i];
  layout.file_bytes = data_start + offset;
  return layout;
}

std::string SafetensorsLayout::FileHead() const {
  std::string head(8, '\0');
  for (int i = 0; i < 8; ++i) head[static_cast<size_t>(i)] = static_cast<char>(uint64_t{header.size()} >> (8 * i));
  return head + header;
}

absl::StatusOr<std::string> BuildSafetensorsHeader(
    std::span<const SafetensorsTensorSpec> specs,
    const std::map<std::string, std::string>& metadata) {
  ERNIE_ASSIGN_OR_RETURN(SafetensorsLayout layout, PlanSafetensors(specs, metadata));
  return std::move(layout.header);
}

absl::Status WriteSafetensors(const std::string& path,
                              std::span<const SafetensorsTensorSpec> specs,
                              const SafetensorsChunkFiller& fill,
                              const SafetensorsWriteOptions& options) {
  ERNIE_ASSIGN_OR_RETURN(const SafetensorsLayout layout, PlanSafetensors(specs, options.metadata));
  const size_t chunk_limit = std::max<size_t>(8, options.chunk_bytes / 8 * 8);

  const std::string temp_path = path + ".tmp";
  UniqueFile file(std::fopen(temp_path.c_str(), "wb"));
  if (file == nullptr) return IoError("cannot create", temp_path);

  auto write_all = [&](const void* data, size_t size) -> absl::Status {
    if (size != 0 && std::fwrite(data, 1, size, file.get()) != size) {
      return IoError("cannot write", temp_path);
    }
    return absl::OkStatus();
  };

  const std::string head = layout.FileHead();
  absl::Status status = write_all(head.data(), head.size());

  std::vector<uint8_t> buffer;
  for (size_t index : FileOrder(specs)) {
    if (!status.ok()) break;
    const uint64_t bytes = layout.bytes[index];
    for (uint64_t offset = 0; offset < bytes && status.ok();) {
      const size_t size = static_cast<size_t>(std::min<uint64_t>(chunk_limit, bytes - offset));
      buffer.resize(size);
      status = fill(index, offset, std::span<uint8_t>(buffer.data(), size));
      if (status.ok()) status = write_all(buffer.data(), size);
      offset += size;
    }
  }
  if (status.ok() && std::fflush(file.get()) != 0) status = IoError("cannot write", temp_path);
  std::FILE* raw = file.release();
  if (std::fclose(raw) != 0 && status.ok()) status = IoError("cannot close", temp_path);
  if (!status.ok()) {
    std::remove(temp_path.c_str());
    return status;
  }
  if (std::rename(temp_path.c_str(), path.c_str()) != 0) {
    absl::Status rename_error = IoError(absl::StrCat("cannot rename '", temp_path, "' to"), path);
    std::remove(temp_path.c_str());
    return rename_error;
  }
  return absl::OkStatus();
}

}  // namespace ernie::model
