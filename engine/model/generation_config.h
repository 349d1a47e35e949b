// generation_config.json: the sampling defaults a model ships with. vLLM
// applies these under each request's own fields; so do we.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ernie {

struct GenerationDefaults {
  std::optional<bool> do_sample;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> repetition_penalty;
  std::optional<float> presence_penalty;
  std::optional<float> frequency_penalty;
  std::optional<int> max_new_tokens;
  std::vector<int64_t> eos_token_ids;  // empty when the file names none
};

// Reads DIR/generation_config.json; a missing file gives empty defaults, a
// malformed one an InvalidArgument naming the key.
absl::StatusOr<GenerationDefaults> LoadGenerationDefaults(const std::string& model_dir);
absl::StatusOr<GenerationDefaults> ParseGenerationDefaults(const std::string& json_text, const std::string& file_name);

}  // namespace ernie
