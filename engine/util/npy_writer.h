// Writes a float32 array as a NumPy .npy file (format 1.0), so dumps can be
// read by numpy.load in the reference scripts.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ernie {

absl::Status WriteNpyFloat32(const std::string& path, std::span<const float> data, const std::vector<int64_t>& shape);

}  // namespace ernie
