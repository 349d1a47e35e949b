// Host-side repack of one AutoAWQ "gemm" linear into the layout the CUDA AWQ
// kernels read (awq_gemm.h documents it). Runs once per linear at load; the
// caller copies the two arrays to the device and points an AwqWeightsView
// at them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace ernie::cuda {

// The tensors as AutoAWQ stores them (ARCHITECTURE.md): eight 4-bit values
// per int32, output column 8j + kAwqOrder[i] in nibble i of word j.
struct AwqRawLinear {
  std::span<const int32_t> qweight;  // [k, n/8]
  std::span<const int32_t> qzeros;   // [k/group_size, n/8]
  std::span<const uint16_t> scales;  // [k/group_size, n], IEEE fp16 bits
  int32_t k = 0;                     // input features: a multiple of 64 and of group_size
  int32_t n = 0;                     // output features: a multiple of 8
  int32_t group_size = 0;            // a power of two >= 32
};

inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

struct AwqPackedLinear {
  std::vector<uint32_t> packed;   // AwqPackedWords(n, k) words
  std::vector<uint32_t> records;  // AwqRecordWords(n, k, group_size) words
  int32_t k = 0, n = 0, group_size = 0;
};

// InvalidArgument naming the tensor or size that does not fit.
absl::StatusOr<AwqPackedLinear> RepackAwqLinear(const AwqRawLinear& raw);

}  // namespace ernie::cuda
