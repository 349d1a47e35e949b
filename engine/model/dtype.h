// Element types of checkpoint tensors the engine reads.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace ernie {

// kI32 holds AWQ's packed 4-bit weights and zero points (never a float weight).
enum class DType { kF32, kF16, kBF16, kI32 };

// Bytes per element.
constexpr size_t DTypeSize(DType t) { return t == DType::kF32 || t == DType::kI32 ? 4 : 2; }

// safetensors spelling: "F32", "F16", "BF16", "I32".
std::string_view DTypeSafetensorsName(DType t);
std::optional<DType> DTypeFromSafetensorsName(std::string_view name);

// config.json spelling (torch_dtype / dtype): "float32", "float16", "bfloat16"
// ("int32" for kI32, which config.json never declares as the model dtype).
std::string_view DTypeConfigName(DType t);
std::optional<DType> DTypeFromConfigName(std::string_view name);

}  // namespace ernie
