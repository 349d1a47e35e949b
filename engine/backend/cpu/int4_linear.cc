#include "engine/backend/cpu/int4_linear.h"

#include <algorithm>
#include <vector>

#include "engine/backend/cpu/linear.h"
#include "engine/model/awq_format.h"
#include "engine/util/half.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define ERNIE_CPU_AVX2 1
#endif

namespace ernie::cpu {

namespace {

// Output columns per task: 8 packed words, a tile of group x 64 floats
// (32 KiB at group 128) that the m rows of x reuse.
constexpr int64_t kColumnBlock = 64;

#ifdef ERNIE_CPU_AVX2
// The 8 columns of one AutoAWQ word as floats, in column order: each lane
// shifts the word by its column's nibble (kAwqUnpackOrder), as AwqNibble does.
inline __m256 AwqColumns8(int32_t word) {
  const __m256i shifts = _mm256_setr_epi32(4 * kAwqUnpackOrder[0], 4 * kAwqUnpackOrder[1], 4 * kAwqUnpackOrder[2],
                                           4 * kAwqUnpackOrder[3], 4 * kAwqUnpackOrder[4], 4 * kAwqUnpackOrder[5],
                                           4 * kAwqUnpackOrder[6], 4 * kAwqUnpackOrder[7]);
  return _mm256_cvtepi32_ps(
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(word), shifts), _mm256_set1_epi32(0xF)));
}
#endif

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
    int64_t j = c0 / 8;
#ifdef ERNIE_CPU_AVX2
    // A word's 8 columns at once: each lane shifts the word by its column's
    // nibble (kAwqUnpackOrder), then the same (q - z) * s as below. At batch 1
    // each weight is dequantised once and used once, so this loop was the
    // int4 linear's cost: one word at a time it made AWQ decode slower than bf16.
    for (; j < c1 / 8; ++j) {
      const int64_t o = 8 * j - c0;
      const __m256 centred = _mm256_sub_ps(AwqColumns8(q[j]), _mm256_loadu_ps(zero + o));
      _mm256_storeu_ps(dst + o, _mm256_mul_ps(centred, _mm256_loadu_ps(scale + o)));
    }
#endif
    for (; j < c1 / 8; ++j)
      for (int c = 0; c < 8; ++c) {
        const int64_t o = 8 * j + c - c0;
        // (q - z) * s exactly as DequantizeAwqRows: q - z is an exact small integer.
        dst[o] = (static_cast<float>(AwqNibble(q[j], c)) - zero[o]) * scale[o];
      }
  }
}

#ifdef ERNIE_CPU_AVX2
// One row of x (a decode step) against a full block of 64 columns: each
// input row's 8 words are dequantised straight into registers and used at
// once, with no tile between. The same values and the same multiply-adds in
// the same order as ColumnBlock's tile path, so the same sums.
void DecodeColumnBlock(const float* x, const AwqLinearWeights& w, const float* bias, float* y, int64_t c0) {
  const int64_t k = w.in_features(), n = w.out_features(), words = n / 8, group = w.group_size;
  const auto* qweight = static_cast<const int32_t*>(w.qweight->data());
  const auto* qzeros = static_cast<const int32_t*>(w.qzeros->data());
  const auto* scales = static_cast<const uint16_t*>(w.scales->data());
  constexpr int kVectors = kColumnBlock / 8;
  for (int64_t o = c0; o < c0 + kColumnBlock; ++o) y[o] = bias ? bias[o] : 0.0f;
  for (int64_t k0 = 0; k0 < k; k0 += group) {
    const int64_t g = k0 / group;
    __m256 zero[kVectors], scale[kVectors], acc[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      const int64_t j = c0 / 8 + v;
      zero[v] = AwqColumns8(qzeros[g * words + j]);
      scale[v] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + g * n + 8 * j)));
      acc[v] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < group; ++i) {
      const __m256 xv = _mm256_set1_ps(x[k0 + i]);
      const int32_t* q = qweight + (k0 + i) * words + c0 / 8;
      for (int v = 0; v < kVectors; ++v) {
        const __m256 weight = _mm256_mul_ps(_mm256_sub_ps(AwqColumns8(q[v]), zero[v]), scale[v]);
        acc[v] = _mm256_fmadd_ps(xv, weight, acc[v]);
      }
    }
    for (int v = 0; v < kVectors; ++v) {
      float* yo = y + c0 + 8 * v;
      _mm256_storeu_ps(yo, _mm256_add_ps(_mm256_loadu_ps(yo), acc[v]));
    }
  }
}
#endif

// y[:, c0:c1] = x W^T[:, c0:c1] + b for all m rows.
void ColumnBlock(const float* x, int64_t m, const AwqLinearWeights& w, const float* bias, float* y, int64_t c0,
                 int64_t c1, std::vector<float>& tile) {
  const int64_t k = w.in_features(), n = w.out_features(), group = w.group_size, width = c1 - c0;
  tile.resize(static_cast<size_t>(group * width));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t o = c0; o < c1; ++o) y[r * n + o] = bias ? bias[o] : 0.0f;
  for (int64_t k0 = 0; k0 < k; k0 += group) {
    DequantizeTile(w, k0, group, c0, c1, tile.data());
#ifdef ERNIE_CPU_AVX2
    if (width == kColumnBlock) {
      // The loop below with its 64 sums in registers rather than in memory:
      // the same multiply-adds in the same order.
      for (int64_t r = 0; r < m; ++r) {
        __m256 acc[kColumnBlock / 8];
        for (__m256& a : acc) a = _mm256_setzero_ps();
        const float* xr = x + r * k + k0;
        for (int64_t i = 0; i < group; ++i) {
          const __m256 xv = _mm256_set1_ps(xr[i]);
          const float* t = tile.data() + i * width;
          for (int v = 0; v < kColumnBlock / 8; ++v) acc[v] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(t + 8 * v), acc[v]);
        }
        float* yr = y + r * n + c0;
        for (int v = 0; v < kColumnBlock / 8; ++v)
          _mm256_storeu_ps(yr + 8 * v, _mm256_add_ps(_mm256_loadu_ps(yr + 8 * v), acc[v]));
      }
      continue;
    }
#endif
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
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t c0 = b * kColumnBlock, c1 = std::min(n, (b + 1) * kColumnBlock);
#ifdef ERNIE_CPU_AVX2
      if (m == 1 && c1 - c0 == kColumnBlock) {
        DecodeColumnBlock(x, w, bias, y, c0);
        continue;
      }
#endif
      ColumnBlock(x, m, w, bias, y, c0, c1, tile);
    }
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
