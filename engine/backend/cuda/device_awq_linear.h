// AWQ 4-bit linears on the device: AutoAWQ tensors of one or more linears
// that read the same input (q|k|v, gate|up) concatenated along the outputs,
// repacked once at load into the layout of kernels/awq_gemm.h, and uploaded.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "absl/status/statusor.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/kernels/awq_gemm.h"
#include "engine/model/awq_format.h"

namespace ernie::cuda {

struct DeviceAwqLinear {
  DeviceBuffer<uint32_t> packed;   // AwqPackedWords(n, k) words
  DeviceBuffer<uint32_t> records;  // AwqRecordWords(n, k, group_size) words
  int32_t n = 0, k = 0, group_size = 0;

  bool empty() const { return n == 0; }
  AwqWeightsView view() const { return {packed.data(), records.data(), n, k, group_size}; }
  int64_t bytes() const { return static_cast<int64_t>(packed.bytes() + records.bytes()); }
};

// The parts' outputs side by side (same in_features and group size, which the
// loader checked); InvalidArgument when the kernels cannot take the shape
// (in_features a multiple of 64, naming the tensor), ResourceExhausted when
// the device is full.
absl::StatusOr<DeviceAwqLinear> UploadAwqLinears(std::initializer_list<const AwqLinearWeights*> parts);

}  // namespace ernie::cuda
