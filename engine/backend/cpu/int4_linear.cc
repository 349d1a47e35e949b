#include "engine/backend/cpu/int4_linear.h"

#include <algorithm>
#include <vector>

#include "engine/backend/cpu/linear.h"
#include "engine/model/awq_format.h"
#include "engine/util/half.h"

namespace ernie::cpu {

namespace {

// Output columns per task: 8 packed words, a tile of group x 64 floats
// (32 KiB at group 128) that the m rows of x reuse.
constexpr int64_t kColumnBlock = 64;

// Dequantises inputs [k0, k0 + rows) x columns [c0, c1) into tile [rows, c1 - c0].
void DequantizeTile(const AwqLinearWeights& w, int64_t k0, int64_t rows, int64_t c0, int64_t c1, float* tile) {
  const int64_t n = w.out_features(), words = n / 8, width = c1 - c0;
  const auto* qweight = static_cast<const int32_t*>(w.qweight->data());
  const auto* qzeros = static_cast<const int32_t*>(w.qzeros->data());
  const auto* scales = static_cast<const uint16_t*>(w.scales->data());
  const int64_t g = k0 / w.group_size;
  // Zero points and scales are shared by the whole group: unpack them once.
  float zero[kColumnBlock], scale[kColumnBlock];
  for (int64_t j = c0 / 8; j < c1 / 8; ++j)
    for (int c = 0; c < 8; ++c) {
      const int64_t o = 8 * j + c;
      zero[o - c0] = static_cast<float>(AwqNibble(qzeros[g * words + j], c));
      scale[o - c0] = F16ToFloat(scales[g * n + o]);
    }
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t* q = qweight + (k0 + i) * words;
    float* dst = tile + i * width;
    for (int64_t j = c0 / 8; j < c1 / 8; ++j)
      for (int c = 0; c < 8; ++c) {
        const int64_t o = 8 * j + c - c0;
        // (q - z) * s exactly as DequantizeAwqRows: q - z is an exact small integer.
        dst[o] = (static_cast<float>(AwqNibble(q[j], c)) - zero[o]) * scale[o];
      }
  }
}

// y[:, c0:c1] = x W^T[:, c0:c1] + b for all m rows.
void ColumnBlock(const float* x, int64_t m, const AwqLinearWeights& w, const float* bias, float* y, int64_t c0,
                 int64_t c1, std::vector<float>& tile) {
  const int64_t k = w.in_features(), n = w.out_features(), group = w.group_size, width = c1 - c0;
  tile.resize(static_cast<size_t>(group * width));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t o = c0; o < c1; ++o) y[r * n + o] = bias ? bias[o] : 0.0f;
  for (int64_t k0 = 0; k0 < k; k0 += group) {
    DequantizeTile(w, k0, group, c0, c1, tile.data());
    for (int64_t r = 0; r < m; ++r) {
      float acc[kColumnBlock] = {};
      const float* xr = x + r * k + k0;
      for (int64_t i = 0; i < group; ++i) {
        const float xv = xr[i];
        const float* t = tile.data() + i * width;
        for (int64_t o = 0; o < width; ++o) acc[o] += xv * t[o];
      }
      float* yr = y + r * n + c0;
      for (int64_t o = 0; o < width; ++o) yr[o] += acc[o];
    }
  }
}

}  // namespace

void Int4Linear(const float* x, int64_t m, const AwqLinearWeights& w, const float* bias, float* y, ThreadPool& pool) {
  const int64_t n = w.out_features();
  const int64_t blocks = (n + kColumnBlock - 1) / kColumnBlock;
  pool.ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    thread_local std::vector<float> tile;  // each thread's dequantised tile (grows, never shrinks)
    for (int64_t b = b0; b < b1; ++b)
      ColumnBlock(x, m, w, bias, y, b * kColumnBlock, std::min(n, (b + 1) * kColumnBlock), tile);
  });
}

void ApplyLinear(const float* x, int64_t m, const LinearWeights& w, const float* bias, float* y, ThreadPool& pool) {
  if (w.is_awq()) {
    Int4Linear(x, m, w.awq, bias, y, pool);
  } else {
    Linear(x, m, w.in_features(), *w.weight, bias, y, pool);
  }
}

}  // namespace ernie::cpu
