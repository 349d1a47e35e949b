// A read-only memory map of a whole file. Checkpoints are read through this,
// so loading a model copies nothing: tensors are views into the mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace ernie {

class MappedFile {
 public:
  // kNow: every page is read in before Open returns (several readers:
  // page_in.h); kByCaller: pages come in on first use, or by a
  // BackgroundPageIn the caller starts.
  enum class PageIn { kNow, kByCaller };

  // Maps `path` read-only. NotFound when it does not exist, PermissionDenied
  // / Internal for other failures; the message names the file.
  static absl::StatusOr<MappedFile> Open(const std::string& path, PageIn page_in = PageIn::kNow);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  void Reset();

  const uint8_t* data_ = nullptr;  // start of the mapping (nullptr for an empty file)
  size_t size_ = 0;                // file size in bytes
  std::string path_;               // for error messages
};

}  // namespace ernie
