// What vLLM's serve options mean for ernie-serve, checked before any server
// starts so a wrong option fails in a second with a message, not after a load:
// the model may be a folder or a Hugging Face repo id found in the local
// Hugging Face cache (nothing is downloaded), --quantization awq needs an AWQ
// checkpoint, --tensor-parallel-size must be 1, --dtype must be one vLLM
// knows, --generation-config auto|vllm|FOLDER picks the sampling defaults.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "services/launcher/launcher_options.h"

namespace ernie::launcher {

// The model folder for `model` (a path, or "org/name" resolved in
// $HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub). NotFound names
// where it looked.
absl::StatusOr<std::string> ResolveModelDir(const std::string& model);

// Checks the vLLM options against the resolved model folder and turns
// them into server arguments (appended to `options`). Returns notes to log.
absl::StatusOr<std::vector<std::string>> ApplyVllmOptions(const std::string& model_dir, LauncherOptions* options);

}  // namespace ernie::launcher
