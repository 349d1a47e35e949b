// The inputs the decode-linear kernel tests share (decode_linear_test,
// awq_decode_linear_test, cluster_decode_linear_test): random input rows,
// norm weight, bias, the row map and the residual stream a case starts from.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

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

// Output row r's expected values into expect ([m, out_width]) from the row's
// n dot products `dot` (bias included): kStore, kAddResidual (onto y0) or
// kSiluMul (gate rows, then up rows). kRotaryKv is a test failure: it has a
// test of its own (rotary_epilogue_check.h).
void ExpectEpilogue(cuda::DecodeEpilogue epilogue, int32_t r, std::span<const double> dot,
                    const DecodeLinearInputs& inputs, std::vector<double>& expect);

}  // namespace ernie::testing
