#include "tests/engine/cuda/decode_linear_inputs.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/util/half.h"
#include "tests/engine/cuda/device_copies.h"

namespace ernie::testing {

DecodeLinearInputs MakeDecodeLinearInputs(int32_t m, int32_t n, int32_t k, cuda::DecodeEpilogue epilogue,
                                          bool bf16_input, bool gather, std::mt19937& rng) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int32_t source_rows = gather ? m + 3 : m;
  DecodeLinearInputs in;
  in.x.resize(static_cast<size_t>(source_rows) * k);
  in.x_bf16.resize(in.x.size());
  for (size_t i = 0; i < in.x.size(); ++i) {
    in.x_bf16[i] = FloatToBf16(uni(rng) * 3.0f);
    in.x[i] = bf16_input ? Bf16ToFloat(in.x_bf16[i]) : uni(rng) * 3.0f;
  }
  in.norm_weight.resize(static_cast<size_t>(k));
  for (auto& v : in.norm_weight) v = 0.5f + uni(rng);
  in.bias.resize(static_cast<size_t>(n));
  for (auto& v : in.bias) v = uni(rng);
  in.rows.resize(static_cast<size_t>(m));
  for (int32_t r = 0; r < m; ++r) in.rows[static_cast<size_t>(r)] = gather ? (r * 5 + 2) % source_rows : r;
  in.out_width = epilogue == cuda::DecodeEpilogue::kSiluMul ? n / 2 : n;
  in.y0.resize(static_cast<size_t>(m) * in.out_width);
  for (auto& v : in.y0) v = uni(rng);  // overwritten by every epilogue but kAddResidual
  return in;
}

void ExpectEpilogue(cuda::DecodeEpilogue epilogue, int32_t r, std::span<const double> dot,
                    const DecodeLinearInputs& inputs, std::vector<double>& expect) {
  const int32_t width = inputs.out_width;
  for (int32_t o = 0; o < width; ++o) {
    const size_t at = static_cast<size_t>(r) * width + o;
    switch (epilogue) {
      case cuda::DecodeEpilogue::kStore:
        expect[at] = dot[static_cast<size_t>(o)];
        break;
      case cuda::DecodeEpilogue::kAddResidual:
        expect[at] = inputs.y0[at] + dot[static_cast<size_t>(o)];
        break;
      case cuda::DecodeEpilogue::kSiluMul: {
        const double g = dot[static_cast<size_t>(o)], u = dot[static_cast<size_t>(o + width)];
        expect[at] = g / (1.0 + std::exp(-g)) * u;
        break;
      }
      case cuda::DecodeEpilogue::kRotaryKv:
        ADD_FAILURE() << "kRotaryKv has its own test";
        return;
    }
  }
}

DeviceDecodeLinearInputs::DeviceDecodeLinearInputs(const DecodeLinearInputs& in)
    : x(Upload(in.x)),
      norm_weight(Upload(in.norm_weight)),
      bias(Upload(in.bias)),
      y(Upload(in.y0)),
      x_bf16(Upload(in.x_bf16)),
      rows(Upload(in.rows)) {}

}  // namespace ernie::testing
