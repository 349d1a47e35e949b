// What ernie-serve checks before it starts any server, and the exit code of
// each failure, so scripts and supervisors can tell them apart:
//   0 stopped cleanly, 1 a server failed (or died too often),
//   2 bad command line, 3 model not found, 4 model unreadable,
//   5 cannot write (the demo checkpoint: disk full, file size limit, read-only).
#pragma once

#include <string>

#include "absl/status/status.h"

namespace ernie::launcher {

enum ExitCode : int {
  kExitOk = 0,
  kExitServerFailed = 1,
  kExitUsage = 2,
  kExitModelNotFound = 3,
  kExitModelUnreadable = 4,
  kExitCannotWrite = 5,
};

// Every file a server will read in `model_dir` can be opened and read:
// config.json, the tokenizer files present, and each *.safetensors (its
// first bytes; the worker maps the rest). NotFound names a missing file
// (config.json, or no safetensors at all); PermissionDenied / DataLoss name
// the file that cannot be read and why (errno's text).
// weights_needed false (--load-format dummy): config and tokenizer only.
absl::Status CheckModelReadable(const std::string& model_dir, bool weights_needed = true);

// One file opens and its first bytes read (NotFound / PermissionDenied /
// DataLoss naming it otherwise).
absl::Status CheckReadableFile(const std::string& path);

// The exit code for a failed model check or resolution.
int ExitCodeFor(const absl::Status& model_status);

}  // namespace ernie::launcher
