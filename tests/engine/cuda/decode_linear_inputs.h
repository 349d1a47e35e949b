// The inputs the decode-linear kernel tests share (decode_linear_test,
// awq_decode_linear_test, cluster_decode_linear_test): random input rows,
// norm weight, bias, the row map and the residual stream a case starts from.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/kernels/decode_linear.h"

namespace ernie::testing {

struct DecodeLinearInputs {
  // [source rows, k]: m rows, or m + 3 when the case gathers rows. x holds
  // the bf16 values of x_bf16 for bf16-input cases, so host and kernel see
  // the same numbers.
  std::vector<float> x;
  std::vector<uint16_t> x_bf16;
  std::vector<float> norm_weight;  // [k], in [-0.5, 1.5)
  std::vector<float> bias;         // [n]
  std::vector<int32_t> rows;       // [m]: the input row of each output row
  std::vector<float> y0;           // [m, out_width]: the residual stream for kAddResidual
  int32_t out_width = 0;           // n, or n / 2 for kSiluMul
};

DecodeLinearInputs MakeDecodeLinearInputs(int32_t m, int32_t n, int32_t k, cuda::DecodeEpilogue epilogue,
                                          bool bf16_input, bool gather, std::mt19937& rng);

// The inputs on the device, and the DecodeLinearParams of a case that reads
// them: every field but the weights (each kernel takes its own; set p.w).
// Case: any struct with m, n, k, epilogue, bf16_input, norm, gather, bias.
struct DeviceDecodeLinearInputs {
  explicit DeviceDecodeLinearInputs(const DecodeLinearInputs& in);

  template <typename Case>
  cuda::DecodeLinearParams Params(const Case& c) {
    return {.x_f32 = c.bf16_input ? nullptr : x.data(),
            .x_bf16 = c.bf16_input ? reinterpret_cast<const __nv_bfloat16*>(x_bf16.data()) : nullptr,
            .row_index = c.gather ? rows.data() : nullptr,
            .norm_weight = c.norm ? norm_weight.data() : nullptr,
            .eps = 1e-5f,
            .bias = c.bias ? bias.data() : nullptr,
            .y = y.data(),
            .m = c.m,
            .n = c.n,
            .k = c.k,
            .epilogue = c.epilogue};
  }

  cuda::DeviceBuffer<float> x, norm_weight, bias, y;  // y starts as the inputs' y0
  cuda::DeviceBuffer<uint16_t> x_bf16;
  cuda::DeviceBuffer<int32_t> rows;
};

// Output row r's expected values into expect ([m, out_width]) from the row's
// n dot products `dot` (bias included): kStore, kAddResidual (onto y0) or
// kSiluMul (gate rows, then up rows). kRotaryKv is a test failure: it has a
// test of its own (rotary_epilogue_check.h).
void ExpectEpilogue(cuda::DecodeEpilogue epilogue, int32_t r, std::span<const double> dot,
                    const DecodeLinearInputs& inputs, std::vector<double>& expect);

}  // namespace ernie::testing
