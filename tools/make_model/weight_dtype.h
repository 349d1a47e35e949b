// The element types a checkpoint can be written in, with their spellings in
// config.json ("torch_dtype") and in safetensors headers.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace ernie::make_model {

enum class WeightDtype { kBFloat16, kFloat16, kFloat32 };

// "bfloat16" | "float16" | "float32" (the --dtype values), else InvalidArgument.
absl::StatusOr<WeightDtype> WeightDtypeByName(const std::string& name);

std::string TorchDtypeName(WeightDtype dtype);        // "bfloat16"
std::string SafetensorsDtypeName(WeightDtype dtype);  // "BF16"
size_t WeightDtypeBytes(WeightDtype dtype);           // 2 or 4

}  // namespace ernie::make_model
