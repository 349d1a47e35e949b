// Element types of checkpoint tensors the engine reads.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace ernie {

enum class DType { kF32, kF16, kBF16 };

// Bytes per element.
constexpr size_t DTypeSize(DType t) { return t == DType::kF32 ? 4 : 2; }

// safetensors spelling: "F32", "F16", "BF16".
std::string_view DTypeSafetensorsName(DType t);
std::optional<DType> DTypeFromSafetensorsName(std::string_view name);

// config.json spelling (torch_dtype / dtype): "float32", "float16", "bfloat16".
std::string_view DTypeConfigName(DType t);
std::optional<DType> DTypeFromConfigName(std::string_view name);

}  // namespace ernie
