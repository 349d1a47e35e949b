#include "tools/quantize/group_quantizer.h"

#include <algorithm>
#include <cmath>

#include "engine/model/awq_format.h"
#include "engine/util/half.h"

namespace ernie::quantize {

namespace {

// One group's stored scale (f16-rounded) and zero point.
struct GroupCode {
  float scale;
  float zero;
};

GroupCode CodeOf(const float* part, int64_t group) {
  // Plain min / max chains (minmax_element tracks positions, which keeps the
  // compiler from vectorizing); the weights are finite.
  float lo = part[0], hi = part[0];
  for (int64_t i = 1; i < group; ++i) {
    lo = part[i] < lo ? part[i] : lo;
    hi = part[i] > hi ? part[i] : hi;
  }
  // Clamped to f16's largest finite value so the stored scale is never inf.
  const float scale = F16ToFloat(FloatToF16(std::min(std::max(hi - lo, 1e-5f) / 15.0f, 65504.0f)));
  return {scale, std::clamp(-std::nearbyint(lo / scale), 0.0f, 15.0f)};
}

// clamp(round(w / scale) + zero, 0, 15), rounding to nearest even.
float Quantize(float w, GroupCode c) {
  const float q = std::nearbyint(w / c.scale) + c.zero;
  return q < 0.0f ? 0.0f : (q > 15.0f ? 15.0f : q);
}

}  // namespace

AwqTensors QuantizeGroupwise(const float* w, int64_t out, int64_t in, int64_t group) {
  AwqTensors t{.in = in, .out = out, .group = group};
  const int64_t groups = in / group, words = out / 8;
  t.qweight.assign(static_cast<size_t>(in * words), 0);
  t.qzeros.assign(static_cast<size_t>(groups * words), 0);
  t.scales.assign(static_cast<size_t>(groups * out), 0);
  std::vector<uint8_t> q(static_cast<size_t>(in * out)), z(static_cast<size_t>(groups * out));  // [in, out], [groups, out]
  for (int64_t o = 0; o < out; ++o) {
    const float* row = w + o * in;
    for (int64_t g = 0; g < groups; ++g) {
      const float* part = row + g * group;
      const GroupCode c = CodeOf(part, group);
      t.scales[static_cast<size_t>(g * out + o)] = FloatToF16(c.scale);
      z[static_cast<size_t>(g * out + o)] = static_cast<uint8_t>(c.zero);
      for (int64_t i = 0; i < group; ++i)
        q[static_cast<size_t>((g * group + i) * out + o)] = static_cast<uint8_t>(Quantize(part[i], c));
    }
  }
  for (int64_t i = 0; i < in; ++i)
    for (int64_t j = 0; j < words; ++j) t.qweight[static_cast<size_t>(i * words + j)] = AwqPack(&q[static_cast<size_t>(i * out + 8 * j)]);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t j = 0; j < words; ++j) t.qzeros[static_cast<size_t>(g * words + j)] = AwqPack(&z[static_cast<size_t>(g * out + 8 * j)]);
  return t;
}

void DequantizeToOutIn(const AwqTensors& t, float* w) {
  const int64_t words = t.out / 8;
  for (int64_t i = 0; i < t.in; ++i) {
    const int64_t g = i / t.group;
    for (int64_t j = 0; j < words; ++j) {
      const int32_t q = t.qweight[static_cast<size_t>(i * words + j)], z = t.qzeros[static_cast<size_t>(g * words + j)];
      for (int c = 0; c < 8; ++c) {
        const int64_t o = 8 * j + c;
        w[o * t.in + i] = static_cast<float>(AwqNibble(q, c) - AwqNibble(z, c)) * F16ToFloat(t.scales[static_cast<size_t>(g * t.out + o)]);
      }
    }
  }
}

void QuantizeDequantizeRows(const float* w, int64_t rows, int64_t in, int64_t group, float* out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < in / group; ++g) {
      const float* part = w + r * in + g * group;
      float* dst = out + r * in + g * group;
      const GroupCode c = CodeOf(part, group);
      // q - z is a small integer, exact in float, as DequantizeToOutIn's
      // nibble difference is (and never -0: q is -0 only when z is too).
      for (int64_t i = 0; i < group; ++i) dst[i] = (Quantize(part[i], c) - c.zero) * c.scale;
    }
}

}  // namespace ernie::quantize
