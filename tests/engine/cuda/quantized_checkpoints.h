// Checkpoints the AWQ GPU tests write for themselves: a random float
// checkpoint of a shape (ernie-make-model's library) and its RTN AutoAWQ
// quantization (ernie-quantize's library), in a scratch folder.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "tools/make_model/model_shape.h"

namespace ernie::testing {

// A folder under the system's temporary directory, removed with the object.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Writes a random bf16 checkpoint of `shape` (dense or MoE) into `dir`.
absl::Status WriteFloatCheckpoint(const make_model::DenseShape& shape, const std::string& dir);

// Quantizes the checkpoint in `in` into `out`: round to nearest, `group` inputs a group.
absl::Status QuantizeRtn(const std::string& in, const std::string& out, int64_t group);

}  // namespace ernie::testing
