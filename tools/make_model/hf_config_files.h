// The JSON files of a Hugging Face ERNIE-4.5 checkpoint, spelled as Baidu's
// release of baidu/ERNIE-4.5-0.3B-PT spells them (remote-code era: top-level
// rope_theta, torch_dtype, architectures ["Ernie4_5_ForCausalLM"]).
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "engine/model/quantization_config.h"
#include "nlohmann/json.hpp"
#include "tools/make_model/model_shape.h"
#include "tools/make_model/weight_dtype.h"

namespace ernie::make_model {

// The chat template of the release's tokenizer_config.json (a Jinja2 program).
extern const char* const kErnieChatTemplate;

nlohmann::ordered_json ModelConfigJson(const DenseShape& shape, WeightDtype dtype);
nlohmann::ordered_json GenerationConfigJson();
nlohmann::ordered_json TokenizerConfigJson();
nlohmann::ordered_json SpecialTokensMapJson();
// {content: id} of the added tokens that are not pieces of tokenizer.model.
nlohmann::ordered_json AddedTokensJson();

// Writes `json` to `path` with two-space indentation and a final newline.
absl::Status WriteJsonFile(const std::string& path, const nlohmann::ordered_json& json);

// Writes config.json, generation_config.json, tokenizer_config.json,
// special_tokens_map.json and added_tokens.json into `dir`. With `awq`,
// config.json carries its quantization_config (what ernie-quantize writes).
absl::Status WriteConfigFiles(const std::string& dir, const DenseShape& shape, WeightDtype dtype,
                              const std::optional<AwqConfig>& awq = std::nullopt);

}  // namespace ernie::make_model
