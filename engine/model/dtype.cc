#include "engine/model/dtype.h"

namespace ernie {

std::string_view DTypeSafetensorsName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
  }
  return "?";
}

std::optional<DType> DTypeFromSafetensorsName(std::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "F16") return DType::kF16;
  if (name == "BF16") return DType::kBF16;
  if (name == "I32") return DType::kI32;
  return std::nullopt;
}

std::string_view DTypeConfigName(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kI32: return "int32";
  }
  return "?";
}

std::optional<DType> DTypeFromConfigName(std::string_view name) {
  if (name == "float32" || name == "float") return DType::kF32;
  if (name == "float16" || name == "half") return DType::kF16;
  if (name == "bfloat16") return DType::kBF16;
  return std::nullopt;
}

}  // namespace ernie
