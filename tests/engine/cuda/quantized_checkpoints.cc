#include "tests/engine/cuda/quantized_checkpoints.h"

#include <random>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "tools/make_model/checkpoint_writer.h"
#include "tools/make_model/hf_config_files.h"
#include "tools/quantize/quantize_model.h"

namespace ernie::testing {

ScratchDir::ScratchDir(const std::string& tag) {
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() / absl::StrCat("ernie_", tag, "_", rd());
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

absl::Status WriteFloatCheckpoint(const make_model::DenseShape& shape, const std::string& dir) {
  std::filesystem::create_directories(dir);
  if (auto s = make_model::WriteConfigFiles(dir, shape, make_model::WeightDtype::kBFloat16); !s.ok()) return s;
  return make_model::WriteCheckpoint(dir, make_model::DenseTensorList(shape), {.seed = 5}).status();
}

absl::Status QuantizeRtn(const std::string& in, const std::string& out, int64_t group) {
  return quantize::QuantizeModel(
      {.input_dir = in, .output_dir = out, .method = quantize::QuantMethod::kRtn, .group_size = group, .threads = 2});
}

}  // namespace ernie::testing
