// Helpers for the AWQ tests: run the tools, and copy a checkpoint with its
// tensors or config.json edited (to build bad checkpoints one defect at a time).
#pragma once

#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace ernie::quantize::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line, capturing its output.
CommandResult RunCommand(const std::string& command);

// A fresh folder under the temp dir, removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// One tensor, owned: the unit of EditedCopy's edits.
struct OwnedTensor {
  std::string dtype;  // safetensors spelling
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
using TensorMap = std::map<std::string, OwnedTensor>;

// Every tensor of the model directory `dir`.
TensorMap ReadTensors(const std::string& dir);

// Copies `src` to `dst` (tokenizer and side files too) with the tensors and
// config.json passed through `edit_tensors` and `edit_config`, written as a
// single model.safetensors. Returns an empty string or an error message.
std::string EditedCopy(const std::string& src, const std::string& dst,
                       const std::function<void(TensorMap&)>& edit_tensors,
                       const std::function<void(nlohmann::json&)>& edit_config);

// A float copy of the AWQ checkpoint `src`: every AWQ linear becomes an F32
// .weight [out, in] of its dequantised values; quantization_config is dropped.
std::string DequantizedCopy(const std::string& src, const std::string& dst);

}  // namespace ernie::quantize::testing
