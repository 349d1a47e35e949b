// AutoAWQ's "gemm" 4-bit weight format, as vLLM reads it, and the one place
// that knows its bit layout (the loader, the CPU kernel and ernie-quantize
// all go through here).
//
// One linear y = x W^T (W [out, in] in torch's layout) is stored as
//   <prefix>.qweight  I32 [in, out/8]           4-bit weights q
//   <prefix>.qzeros   I32 [in/group, out/8]     4-bit zero points z
//   <prefix>.scales   F16 [in/group, out]       scales s
// and W^T[i][o] = (q[i][o] - z[i/group][o]) * s[i/group][o], computed in
// float32 (both operands are exact there, so every implementation that
// multiplies in float32 gets the same bits).
// Eight 4-bit values share one int32 in AutoAWQ's interleaved order: nibble
// n (bits 4n..4n+3) of word j holds output column 8j + kAwqPackOrder[n];
// column 8j + c sits in nibble kAwqUnpackOrder[c].
#pragma once

#include <array>
#include <cstdint>

#include "engine/model/tensor_view.h"

namespace ernie {

inline constexpr std::array<int, 8> kAwqPackOrder = {0, 2, 4, 6, 1, 3, 5, 7};
inline constexpr std::array<int, 8> kAwqUnpackOrder = {0, 4, 1, 5, 2, 6, 3, 7};

// The 4-bit value of column `c` (0..7) of a packed word.
inline int AwqNibble(int32_t word, int c) {
  return static_cast<int>((static_cast<uint32_t>(word) >> (4 * kAwqUnpackOrder[static_cast<size_t>(c)])) & 0xFu);
}

// Packs the 4-bit values of 8 consecutive output columns (each 0..15).
inline int32_t AwqPack(const uint8_t values[8]) {
  uint32_t word = 0;
  for (int c = 0; c < 8; ++c) word |= static_cast<uint32_t>(values[c] & 0xF) << (4 * kAwqUnpackOrder[static_cast<size_t>(c)]);
  return static_cast<int32_t>(word);
}

// Group sizes ernie-serve reads and writes (AutoAWQ's usual ones).
inline constexpr std::array<int64_t, 3> kAwqGroupSizes = {32, 64, 128};

// A linear's AutoAWQ 4-bit weights (layout and bit order: awq_format.h).
// Shapes are checked at bind time: in % group_size == 0, out % 8 == 0.
struct AwqLinearWeights {
  const TensorView* qweight = nullptr;  // I32 [in, out/8] packed 4-bit weights
  const TensorView* qzeros = nullptr;   // I32 [in/group_size, out/8] packed 4-bit zero points
  const TensorView* scales = nullptr;   // F16 [in/group_size, out]
  int64_t group_size = 0;               // 32, 64 or 128
  int64_t in_features() const { return qweight->shape[0]; }
  int64_t out_features() const { return scales->shape[1]; }
};

// W^T rows [in_begin, in_end) of `w` in float32: out[(i - in_begin) * out + o]
// = (q - z) * s, bit for bit what tools/reference/awq_dequant_reference.py computes.
void DequantizeAwqRows(const AwqLinearWeights& w, int64_t in_begin, int64_t in_end, float* out);

}  // namespace ernie
