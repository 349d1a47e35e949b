// Fuzz target: a model directory's JSON files as the engine reads them,
// config.json (engine/model/model_config.h) and generation_config.json
// (engine/model/generation_config.h). Both are pure functions of the text
// and must answer every input with a config or an error naming the file.
//
// Input: the text of one JSON file, given to both parsers. A config that
// parses must describe a model the engine can be built for.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

#include "engine/model/generation_config.h"
#include "engine/model/model_config.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = ernie::ParseModelConfig(text, "config.json");
  if (config.ok()) {
    const ernie::ModelConfig& c = *config;
    ERNIE_FUZZ_CHECK(c.vocab_size > 0 && c.hidden_size > 0 && c.num_layers > 0, "sizes are positive");
    ERNIE_FUZZ_CHECK(c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0, "kv heads divide heads");
    ERNIE_FUZZ_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0, "head_dim even and positive");
    ERNIE_FUZZ_CHECK(c.rms_norm_eps > 0 && c.rope_theta > 0, "eps and theta positive");
    if (c.architecture == ernie::Architecture::kErnie45Moe) {
      ERNIE_FUZZ_CHECK(c.moe.top_k >= 1 && c.moe.top_k <= c.moe.num_experts, "moe_k within the experts");
      ERNIE_FUZZ_CHECK(c.moe.layer_end >= 0 && c.moe.layer_end < c.num_layers, "moe layer range resolved");
    }
  } else {
    ERNIE_FUZZ_CHECK(config.status().message().find("config.json") != absl::string_view::npos,
                     "an error names the file");
  }
  auto generation = ernie::ParseGenerationDefaults(std::string(text), "generation_config.json");
  if (!generation.ok()) {
    ERNIE_FUZZ_CHECK(generation.status().message().find("generation_config.json") != absl::string_view::npos,
                     "an error names the file");
  }
  return 0;
}
