// AutoAWQ test tensors for the CUDA int4 tests, and the float32 weights they
// mean, unpacked here from the documented nibble order (ARCHITECTURE.md,
// engine/model/awq_format.h) independently of kernels/awq_repack.cc.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "engine/backend/cuda/kernels/awq_repack.h"

namespace ernie::testing {

// Random AutoAWQ tensors for an n x k linear, plus w[n][k] = (q - z) s.
struct AwqCase {
  std::vector<int32_t> qweight, qzeros;
  std::vector<uint16_t> scales;
  std::vector<float> w;  // [n, k]
  int k, n, group;
  cuda::AwqRawLinear Raw() const {
    return {.qweight = qweight, .qzeros = qzeros, .scales = scales, .k = k, .n = n, .group_size = group};
  }
};

// AutoAWQ words: output column 8j + kAwqOrder[i] in nibble i of word j.
std::vector<int32_t> PackAwq(const std::vector<uint8_t>& values, int rows, int n);

// Nibbles uniform in 0..15, fp16 scales uniform in [0.002, 0.05).
AwqCase MakeAwqCase(int n, int k, int group, std::mt19937& gen);

// w[n][k] = (q - z) s of any AutoAWQ tensors, in float32 (exact).
std::vector<float> DequantizeAwq(const cuda::AwqRawLinear& raw);

}  // namespace ernie::testing
