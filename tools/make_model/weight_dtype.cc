#include "tools/make_model/weight_dtype.h"

#include "absl/strings/str_cat.h"

namespace ernie::make_model {

absl::StatusOr<WeightDtype> WeightDtypeByName(const std::string& name) {
  if (name == "bfloat16") return WeightDtype::kBFloat16;
  if (name == "float16") return WeightDtype::kFloat16;
  if (name == "float32") return WeightDtype::kFloat32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --dtype '", name, "' (expected bfloat16, float16 or float32)"));
}

std::string TorchDtypeName(WeightDtype dtype) {
  switch (dtype) {
    case WeightDtype::kBFloat16: return "bfloat16";
    case WeightDtype::kFloat16: return "float16";
    case WeightDtype::kFloat32: return "float32";
  }
  return "bfloat16";
}

std::string SafetensorsDtypeName(WeightDtype dtype) {
  switch (dtype) {
    case WeightDtype::kBFloat16: return "BF16";
    case WeightDtype::kFloat16: return "F16";
    case WeightDtype::kFloat32: return "F32";
  }
  return "BF16";
}

size_t WeightDtypeBytes(WeightDtype dtype) { return dtype == WeightDtype::kFloat32 ? 4 : 2; }

}  // namespace ernie::make_model
