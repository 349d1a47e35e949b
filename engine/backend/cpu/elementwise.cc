#include "engine/backend/cpu/elementwise.h"

#include <cmath>
#include <cstring>

#include "engine/util/half.h"

namespace ernie::cpu {

namespace {

void WidenRow(const TensorView& t, int64_t offset, int64_t n, float* out) {
  switch (t.dtype) {
    case DType::kF32:
      std::memcpy(out, static_cast<const float*>(t.data()) + offset, static_cast<size_t>(n) * sizeof(float));
      break;
    case DType::kBF16: {
      const auto* p = static_cast<const uint16_t*>(t.data()) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(p[i]);
      break;
    }
    case DType::kF16: {
      const auto* p = static_cast<const uint16_t*>(t.data()) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = F16ToFloat(p[i]);
      break;
    }
    case DType::kI32: {  // integers widen exactly up to 2^24 (AWQ's packed words are never widened)
      const auto* p = static_cast<const int32_t*>(t.data()) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]);
      break;
    }
  }
}

}  // namespace

void EmbeddingGather(const TensorView& embedding, std::span<const int32_t> ids, float* out) {
  const int64_t hidden = embedding.shape[1];
  for (size_t t = 0; t < ids.size(); ++t) WidenRow(embedding, int64_t{ids[t]} * hidden, hidden, out + t * hidden);
}

void WidenToFloat(const TensorView& t, float* out) { WidenRow(t, 0, t.numel(), out); }

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    float sum = 0.0f;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i] * xr[i];
    const float scale = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) o[i] = weight[i] * (xr[i] * scale);
  }
}

void AddInPlace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void SiluAndMul(const float* gate, const float* up, int64_t rows, int64_t dim, float* out) {
  const int64_t n = rows * dim;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void RotaryInverseFrequencies(double theta, int64_t head_dim, float* inv_freq) {
  // transformers computes base ** (arange(0, d, 2) / d) in float32.
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[i] = static_cast<float>(1.0 / std::pow(theta, static_cast<double>(exponent)));
  }
}

void ApplyRotaryInterleaved(float* x, int64_t tokens, int64_t heads, int64_t head_dim,
                            std::span<const int32_t> positions, const float* inv_freq) {
  const int64_t half = head_dim / 2;
  float cos_buf[512], sin_buf[512];  // head_dim / 2 <= 512 (checked by the backend)
  for (int64_t t = 0; t < tokens; ++t) {
    const float pos = static_cast<float>(positions[static_cast<size_t>(t)]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];  // float32 product, as the reference does
      cos_buf[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin_buf[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
    float* row = x + t * heads * head_dim;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = row + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * cos_buf[i] - b * sin_buf[i];
        v[2 * i + 1] = b * cos_buf[i] + a * sin_buf[i];
      }
    }
  }
}

}  // namespace ernie::cpu
