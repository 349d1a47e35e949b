// The check both fused decode linears' kRotaryKv epilogues share
// (decode_linear_test.cc on bf16 weights, awq_decode_linear_test.cc on
// int4): kRotaryKv must equal kStore (bias included) followed by
// rotary_kv_write's kernel: q rotated in y, k rotated and v as they are in
// the paged cache at each row's slot, for 1, 3 and 8 rows (or the row
// counts given, at most 72: the cache has 72 slots of blocks of 3, 96 of 4)
// at scattered positions and slots.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/backend/cuda/kernels/decode_linear.h"

namespace ernie::testing {

// The linear's shape: 4 query heads and 2 KV heads of 16, k = 256.
inline constexpr int32_t kRotaryCheckHeads = 4, kRotaryCheckKvHeads = 2, kRotaryCheckHeadDim = 16, kRotaryCheckK = 256;
inline constexpr int32_t kRotaryCheckN = (kRotaryCheckHeads + 2 * kRotaryCheckKvHeads) * kRotaryCheckHeadDim;

// `launch` runs the kernel under test on p (its weights: kRotaryCheckN x
// kRotaryCheckK, bound by the caller); gtest failures name what differs.
void ExpectRotaryKvEpilogueEqualsTheRotaryKernel(
    const std::function<cudaError_t(const cuda::DecodeLinearParams&)>& launch,
    const std::vector<int32_t>& row_counts = {1, 3, 8});

}  // namespace ernie::testing
