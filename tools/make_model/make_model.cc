#include "tools/make_model/make_model.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "tools/make_model/checkpoint_writer.h"
#include "tools/make_model/hf_config_files.h"
#include "tools/make_model/tokenizer_maker.h"

namespace ernie::make_model {
namespace {

absl::Status PrepareOutputDir(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || !std::filesystem::is_directory(dir)) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create output folder '", dir, "': ",
                                                    error ? error.message() : "not a folder"));
  }
  return absl::OkStatus();
}

absl::Status WriteBinaryFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot create '", path, "'"));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeModel(const MakeModelOptions& options) {
  ERNIE_ASSIGN_OR_RETURN(const std::string tokenizer,
                         MakeTokenizerModel({.corpus_dir = options.corpus_dir}));
  ERNIE_RETURN_IF_ERROR(PrepareOutputDir(options.output_dir));
  ERNIE_RETURN_IF_ERROR(WriteBinaryFile(options.output_dir + "/tokenizer.model", tokenizer));
  std::optional<AwqConfig> awq;
  if (options.awq_group_size > 0) awq = AwqConfig{.group_size = options.awq_group_size};
  ERNIE_RETURN_IF_ERROR(WriteConfigFiles(options.output_dir, options.shape, options.dtype, awq));
  if (options.config_only) return absl::OkStatus();
  const CheckpointOptions checkpoint{.seed = options.seed,
                                     .dtype = options.dtype,
                                     .max_shard_bytes = options.max_shard_bytes};
  ERNIE_RETURN_IF_ERROR(
      WriteCheckpoint(options.output_dir, DenseTensorList(options.shape), checkpoint).status());
  return absl::OkStatus();
}

}  // namespace ernie::make_model
