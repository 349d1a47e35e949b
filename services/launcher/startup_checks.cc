#include "services/launcher/startup_checks.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ernie::launcher {
namespace {

namespace fs = std::filesystem;

// Opens `path` and reads its first bytes: what a server will do first.
absl::Status CheckReadable(const fs::path& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    const std::string reason = absl::StrCat("cannot open ", path.string(), ": ", std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(reason) : absl::PermissionDeniedError(reason);
  }
  char bytes[8];
  const ssize_t got = read(fd, bytes, sizeof(bytes));
  const int error = errno;
  close(fd);
  if (got < 0) return absl::DataLossError(absl::StrCat("cannot read ", path.string(), ": ", std::strerror(error)));
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckModelReadable(const std::string& model_dir, bool weights_needed) {
  const fs::path dir(model_dir);
  if (absl::Status config = CheckReadable(dir / "config.json"); !config.ok()) return config;
  for (const char* name : {"tokenizer.model", "tokenizer_config.json", "generation_config.json"}) {
    std::error_code ec;
    if (!fs::exists(dir / name, ec)) continue;  // optional here; the tokenizer names what it needs
    if (absl::Status file = CheckReadable(dir / name); !file.ok()) return file;
  }
  int weights = 0;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (!absl::EndsWith(entry.path().filename().string(), ".safetensors")) continue;
    ++weights;
    if (absl::Status file = CheckReadable(entry.path()); !file.ok()) return file;
  }
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot list ", model_dir, ": ", ec.message()));
  if (weights == 0 && weights_needed) return absl::NotFoundError(absl::StrCat(model_dir, " holds no *.safetensors weights"));
  return absl::OkStatus();
}

absl::Status CheckReadableFile(const std::string& path) { return CheckReadable(path); }

int ExitCodeFor(const absl::Status& model_status) {
  return model_status.code() == absl::StatusCode::kNotFound ? kExitModelNotFound : kExitModelUnreadable;
}

}  // namespace ernie::launcher
