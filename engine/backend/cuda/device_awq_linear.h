// AWQ 4-bit linears on the device: AutoAWQ tensors of one or more linears
// that read the same input (q|k|v, gate|up) concatenated along the outputs,
// repacked once at load into the row layout the decode kernels read
// (kernels/decode_linear.h: each output row's 4-bit weights contiguous along
// k, with a (scale, -zero * scale) pair per group), and uploaded. Steps too
// large for the decode kernels dequantise a linear to bf16 and run cuBLAS.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/model/awq_format.h"

namespace ernie::cuda {

struct DeviceAwqLinear {
  DeviceBuffer<uint32_t> rows;    // [n, k / 8]: word j of row r holds q[r][8j + t] in bits 4t..4t+3
  DeviceBuffer<float> scales;     // [n, k / group_size, 2]: (s, -z * s)
  int32_t n = 0, k = 0, group_size = 0;

  bool empty() const { return n == 0; }
  const float2* scale_pairs() const { return reinterpret_cast<const float2*>(scales.data()); }
  int64_t bytes() const { return static_cast<int64_t>(rows.bytes() + scales.bytes()); }
};

// Host side of the repack (tested on its own): the parts' outputs side by side.
struct AwqRows {
  std::vector<uint32_t> rows;   // [n, k / 8]
  std::vector<float> scales;    // [n, k / group_size, 2]
  int32_t n = 0, k = 0, group_size = 0;
};
AwqRows RepackAwqRows(std::initializer_list<const AwqLinearWeights*> parts);

// The parts (same in_features and group size, which the loader checked)
// repacked and uploaded; InvalidArgument when the kernels cannot take the
// shape (in_features a multiple of the group, the group a multiple of 32),
// ResourceExhausted when the device is full.
absl::StatusOr<DeviceAwqLinear> UploadAwqLinears(std::initializer_list<const AwqLinearWeights*> parts);

}  // namespace ernie::cuda
