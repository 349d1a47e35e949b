// config.json's "quantization_config" for AutoAWQ checkpoints, validated:
//   {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true,
//    "version": "gemm", "modules_to_not_convert": [...]}
// AutoAWQ's own spellings "w_bit" and "q_group_size" are accepted too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace ernie {

struct AwqConfig {
  int64_t group_size = 128;  // inputs sharing one scale and zero point: 32, 64 or 128
  // A linear whose full name contains one of these strings keeps its float
  // .weight (AutoAWQ's rule: substring match on the module name).
  std::vector<std::string> modules_to_not_convert;

  // Whether the linear called `module` (e.g. "model.layers.0.mlp.up_proj") is quantized.
  bool Quantizes(absl::string_view module) const;
};

// Reads `config["quantization_config"]`: nullopt when absent or null.
// InvalidArgument naming `file` and the key for anything ernie-serve cannot
// read: a quant_method other than awq, bits other than 4, a group size other
// than 32/64/128, zero_point false, a version other than gemm.
absl::StatusOr<std::optional<AwqConfig>> ParseQuantizationConfig(const nlohmann::json& config, absl::string_view file);

// The object written into config.json for `awq` (bits 4, zero_point, gemm).
nlohmann::json AwqQuantizationConfigJson(const AwqConfig& awq);

}  // namespace ernie
