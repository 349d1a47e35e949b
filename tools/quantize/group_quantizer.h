// Group-wise asymmetric 4-bit quantization of one linear into AutoAWQ's
// "gemm" tensors (engine/model/awq_format.h), as AutoAWQ's
// pseudo_quantize_tensor does it: per output column o and group g of
// `group` inputs, s = max(max - min, 1e-5) / 15 (rounded to f16, the stored
// scale), z = clamp(-round(min / s), 0, 15), q = clamp(round(w / s) + z, 0, 15);
// rounding is to nearest even, as torch.round.
#pragma once

#include <cstdint>
#include <vector>

namespace ernie::quantize {

struct AwqTensors {
  int64_t in = 0, out = 0, group = 0;
  std::vector<int32_t> qweight;  // [in, out/8]
  std::vector<int32_t> qzeros;   // [in/group, out/8]
  std::vector<uint16_t> scales;  // [in/group, out] f16 bits
};

// w: [out, in] float32 (torch's layout). Requires in % group == 0, out % 8 == 0.
AwqTensors QuantizeGroupwise(const float* w, int64_t out, int64_t in, int64_t group);

// The weights `t` stands for, back in [out, in] float32: (q - z) * s.
void DequantizeToOutIn(const AwqTensors& t, float* w);

// What QuantizeGroupwise then DequantizeToOutIn give, bit for bit, without
// the packing: `rows` rows of `in` weights (any row count, so a caller can
// split a matrix over threads). AWQ's search rounds every candidate this way.
void QuantizeDequantizeRows(const float* w, int64_t rows, int64_t in, int64_t group, float* out);

}  // namespace ernie::quantize
