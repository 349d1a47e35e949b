#include "engine/model/awq_format.h"

#include "engine/util/half.h"

namespace ernie {

void DequantizeAwqRows(const AwqLinearWeights& w, int64_t in_begin, int64_t in_end, float* out) {
  const int64_t n = w.out_features(), words = n / 8;
  const auto* qweight = static_cast<const int32_t*>(w.qweight->data());
  const auto* qzeros = static_cast<const int32_t*>(w.qzeros->data());
  const auto* scales = static_cast<const uint16_t*>(w.scales->data());
  for (int64_t i = in_begin; i < in_end; ++i) {
    const int64_t g = i / w.group_size;
    float* row = out + (i - in_begin) * n;
    for (int64_t j = 0; j < words; ++j) {
      const int32_t q = qweight[i * words + j], z = qzeros[g * words + j];
      for (int c = 0; c < 8; ++c) {
        const int64_t o = 8 * j + c;
        row[o] = static_cast<float>(AwqNibble(q, c) - AwqNibble(z, c)) * F16ToFloat(scales[g * n + o]);
      }
    }
  }
}

}  // namespace ernie
