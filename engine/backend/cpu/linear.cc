#include "engine/backend/cpu/linear.h"

#include <algorithm>
#include <vector>

#include "engine/util/half.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define ERNIE_CPU_AVX2 1
#endif

namespace ernie::cpu {

namespace {

// Widening loads of 8 consecutive weights into float32 lanes, and a scalar
// load for tails and the portable path.
template <DType T>
struct WeightLoad;

template <>
struct WeightLoad<DType::kF32> {
  using Elem = float;
  static float One(const Elem* p) { return *p; }
#ifdef ERNIE_CPU_AVX2
  static __m256 Eight(const Elem* p) { return _mm256_loadu_ps(p); }
#endif
};

template <>
struct WeightLoad<DType::kBF16> {
  using Elem = uint16_t;
  static float One(const Elem* p) { return Bf16ToFloat(*p); }
#ifdef ERNIE_CPU_AVX2
  static __m256 Eight(const Elem* p) {
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
#endif
};

template <>
struct WeightLoad<DType::kF16> {
  using Elem = uint16_t;
  static float One(const Elem* p) { return F16ToFloat(*p); }
#ifdef ERNIE_CPU_AVX2
  static __m256 Eight(const Elem* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
#endif
};

#ifdef ERNIE_CPU_AVX2
inline float HorizontalSum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_hadd_ps(lo, lo);
  lo = _mm_hadd_ps(lo, lo);
  return _mm_cvtss_f32(lo);
}
#endif

// Dot products of MR rows of x with NR rows of W: out[r][c] = x_r . w_c.
// MR x NR = 2 x 4 keeps all accumulators and operands in 16 ymm registers.
template <DType T, int MR, int NR>
inline void MicroKernel(const float* const* xr, const typename WeightLoad<T>::Elem* const* wr, int64_t k,
                        float out[MR][NR]) {
  using L = WeightLoad<T>;
  int64_t i = 0;
#ifdef ERNIE_CPU_AVX2
  __m256 acc[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NR; ++c) acc[r][c] = _mm256_setzero_ps();
  for (; i + 8 <= k; i += 8) {
    __m256 w[NR];
    for (int c = 0; c < NR; ++c) w[c] = L::Eight(wr[c] + i);
    for (int r = 0; r < MR; ++r) {
      const __m256 xv = _mm256_loadu_ps(xr[r] + i);
      for (int c = 0; c < NR; ++c) acc[r][c] = _mm256_fmadd_ps(xv, w[c], acc[r][c]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NR; ++c) out[r][c] = HorizontalSum(acc[r][c]);
#else
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NR; ++c) out[r][c] = 0.0f;
#endif
  for (; i < k; ++i)
    for (int r = 0; r < MR; ++r)
      for (int c = 0; c < NR; ++c) out[r][c] += xr[r][i] * L::One(wr[c] + i);
}

template <DType T, int MR, int NR>
inline void Tile(const float* x, int64_t m0, int64_t k, const typename WeightLoad<T>::Elem* w, int64_t n0,
                 const float* bias, float* y, int64_t y_stride) {
  const float* xr[MR];
  const typename WeightLoad<T>::Elem* wr[NR];
  for (int r = 0; r < MR; ++r) xr[r] = x + (m0 + r) * k;
  for (int c = 0; c < NR; ++c) wr[c] = w + (n0 + c) * k;
  float out[MR][NR];
  MicroKernel<T, MR, NR>(xr, wr, k, out);
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NR; ++c) y[(m0 + r) * y_stride + n0 + c] = out[r][c] + (bias ? bias[n0 + c] : 0.0f);
}

template <DType T, int NR>
inline void Column(const float* x, int64_t m, int64_t k, const typename WeightLoad<T>::Elem* w, int64_t n0,
                   const float* bias, float* y, int64_t y_stride) {
  int64_t m0 = 0;
  if constexpr (NR == 3)
    for (; m0 + 4 <= m; m0 += 4) Tile<T, 4, NR>(x, m0, k, w, n0, bias, y, y_stride);
  for (; m0 + 2 <= m; m0 += 2) Tile<T, 2, NR>(x, m0, k, w, n0, bias, y, y_stride);
  if (m0 < m) Tile<T, 1, NR>(x, m0, k, w, n0, bias, y, y_stride);
}

template <DType T>
void RowsTyped(const float* x, int64_t m, int64_t k, const void* weight, const float* bias, float* y,
               int64_t y_stride, int64_t n_begin, int64_t n_end) {
  const auto* w = static_cast<const typename WeightLoad<T>::Elem*>(weight);
  int64_t n0 = n_begin;
  if (m >= 4)
    for (; n0 + 3 <= n_end; n0 += 3) Column<T, 3>(x, m, k, w, n0, bias, y, y_stride);
  for (; n0 + 4 <= n_end; n0 += 4) Column<T, 4>(x, m, k, w, n0, bias, y, y_stride);
  for (; n0 < n_end; ++n0) Column<T, 1>(x, m, k, w, n0, bias, y, y_stride);
}

#ifdef ERNIE_CPU_AVX2
// bf16 weights, 16 per 32-byte load. A bf16 value is the top half of a
// float32, so within each 32-bit lane the odd element is already a float once
// the low half is masked off, and the even one after a 16-bit shift. x is
// re-laid out to match: for every 16 inputs, the 8 even then the 8 odd.
// This halves the loads and conversions per weight byte of the generic path.
void PermuteEvenOdd16(const float* x, int64_t m, int64_t k, float* out) {
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < k; i += 16)
      for (int j = 0; j < 8; ++j) {
        out[r * k + i + j] = x[r * k + i + 2 * j];
        out[r * k + i + 8 + j] = x[r * k + i + 2 * j + 1];
      }
}

template <int MR, int NR>
inline void Bf16Tile16(const float* xp, int64_t m0, int64_t k, const uint16_t* w, int64_t n0, const float* bias,
                       float* y, int64_t y_stride) {
  const __m256i high_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  __m256 acc[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NR; ++c) acc[r][c] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; i += 16) {
    __m256 xe[MR], xo[MR];
    for (int r = 0; r < MR; ++r) {
      xe[r] = _mm256_loadu_ps(xp + (m0 + r) * k + i);
      xo[r] = _mm256_loadu_ps(xp + (m0 + r) * k + i + 8);
    }
    for (int c = 0; c < NR; ++c) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + (n0 + c) * k + i));
      const __m256 even = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
      const __m256 odd = _mm256_castsi256_ps(_mm256_and_si256(raw, high_mask));
      for (int r = 0; r < MR; ++r) {
        acc[r][c] = _mm256_fmadd_ps(xe[r], even, acc[r][c]);
        acc[r][c] = _mm256_fmadd_ps(xo[r], odd, acc[r][c]);
      }
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NR; ++c)
      y[(m0 + r) * y_stride + n0 + c] = HorizontalSum(acc[r][c]) + (bias ? bias[n0 + c] : 0.0f);
}

// One weight row against MR rows of x, 64 weights per iteration into four
// accumulator pairs per x row. With a single accumulator the dependent FMA
// chain (2 FMAs of ~4 cycles per 32 bytes) caps a core at ~4 bytes a cycle,
// below its share of memory bandwidth; four chains lift that cap (measured
// 1.46x on one core here), so decode-sized steps stream at memory speed.
template <int MR>
inline void Bf16Row64(const float* xp, int64_t m0, int64_t k, const uint16_t* w, int64_t n0, const float* bias,
                      float* y, int64_t y_stride) {
  const __m256i high_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  constexpr int kChains = 4;
  __m256 acc[MR][2 * kChains];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < 2 * kChains; ++c) acc[r][c] = _mm256_setzero_ps();
  const uint16_t* wr = w + n0 * k;
  int64_t i = 0;
  for (; i + 16 * kChains <= k; i += 16 * kChains) {
    for (int u = 0; u < kChains; ++u) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + i + 16 * u));
      const __m256 even = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
      const __m256 odd = _mm256_castsi256_ps(_mm256_and_si256(raw, high_mask));
      for (int r = 0; r < MR; ++r) {
        const float* xr = xp + (m0 + r) * k + i + 16 * u;
        acc[r][2 * u] = _mm256_fmadd_ps(_mm256_loadu_ps(xr), even, acc[r][2 * u]);
        acc[r][2 * u + 1] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 8), odd, acc[r][2 * u + 1]);
      }
    }
  }
  for (; i < k; i += 16) {  // k % 16 == 0: the last 16-weight groups
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + i));
    const __m256 even = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
    const __m256 odd = _mm256_castsi256_ps(_mm256_and_si256(raw, high_mask));
    for (int r = 0; r < MR; ++r) {
      acc[r][0] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + (m0 + r) * k + i), even, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + (m0 + r) * k + i + 8), odd, acc[r][1]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    __m256 sum = acc[r][0];
    for (int c = 1; c < 2 * kChains; ++c) sum = _mm256_add_ps(sum, acc[r][c]);
    y[(m0 + r) * y_stride + n0] = HorizontalSum(sum) + (bias ? bias[n0] : 0.0f);
  }
}

template <int NR>
inline void Bf16Column16(const float* xp, int64_t m, int64_t k, const uint16_t* w, int64_t n0, const float* bias,
                         float* y, int64_t y_stride) {
  int64_t m0 = 0;
  if constexpr (NR == 1) {
    for (; m0 + 2 <= m; m0 += 2) Bf16Row64<2>(xp, m0, k, w, n0, bias, y, y_stride);
    if (m0 < m) Bf16Row64<1>(xp, m0, k, w, n0, bias, y, y_stride);
    return;
  }
  for (; m0 + 2 <= m; m0 += 2) Bf16Tile16<2, NR>(xp, m0, k, w, n0, bias, y, y_stride);
  if (m0 < m) Bf16Tile16<1, NR>(xp, m0, k, w, n0, bias, y, y_stride);
}

void Bf16RowsPermuted(const float* xp, int64_t m, int64_t k, const void* weight, const float* bias, float* y,
                      int64_t y_stride, int64_t n_begin, int64_t n_end) {
  const auto* w = static_cast<const uint16_t*>(weight);
  int64_t n0 = n_begin;
  // Decode-sized m: one weight row at a time, so the weights stream through
  // memory strictly in order (four interleaved row streams measured at ~60% of
  // the sequential read rate on this machine; one stream at ~100%). Larger m
  // is compute-bound and gains more from reusing each x load across 4 rows.
  if (m > 4)
    for (; n0 + 4 <= n_end; n0 += 4) Bf16Column16<4>(xp, m, k, w, n0, bias, y, y_stride);
  for (; n0 < n_end; ++n0) Bf16Column16<1>(xp, m, k, w, n0, bias, y, y_stride);
}
#endif

}  // namespace

void LinearRows(const float* x, int64_t m, int64_t k, const TensorView& weight, const float* bias, float* y,
                int64_t y_stride, int64_t n_begin, int64_t n_end) {
  switch (weight.dtype) {
    case DType::kF32: RowsTyped<DType::kF32>(x, m, k, weight.data(), bias, y, y_stride, n_begin, n_end); break;
    case DType::kBF16: RowsTyped<DType::kBF16>(x, m, k, weight.data(), bias, y, y_stride, n_begin, n_end); break;
    case DType::kF16: RowsTyped<DType::kF16>(x, m, k, weight.data(), bias, y, y_stride, n_begin, n_end); break;
    case DType::kI32: break;  // int32 tensors are AWQ's packed weights: int4_linear.h computes those
  }
}

void Linear(const float* x, int64_t m, int64_t k, const TensorView& weight, const float* bias, float* y,
            ThreadPool& pool) {
  const int64_t n = weight.shape[0];
#ifdef ERNIE_CPU_AVX2
  if (weight.dtype == DType::kBF16 && k % 16 == 0) {
    // The caller thread's scratch for the re-laid-out x (grows, never shrinks).
    thread_local std::vector<float> permuted;
    if (permuted.size() < static_cast<size_t>(m * k)) permuted.resize(static_cast<size_t>(m * k));
    PermuteEvenOdd16(x, m, k, permuted.data());
    const float* xp = permuted.data();
    constexpr int64_t kRows = 16, kPanelRows = 64;
    const int64_t blocks = (n + kRows - 1) / kRows;
    pool.ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t n_begin = b * kRows, n_end = std::min(n, n_begin + kRows);
        for (int64_t p = 0; p < m; p += kPanelRows)
          Bf16RowsPermuted(xp + p * k, std::min(kPanelRows, m - p), k, weight.data(), bias, y + p * n, n, n_begin, n_end);
      }
    });
    return;
  }
#endif
  // Blocks of 16 output rows: enough work per chunk, aligned to the 4-row tile.
  constexpr int64_t kRowBlock = 16;
  const int64_t blocks = (n + kRowBlock - 1) / kRowBlock;
  // For each block of 16 weight rows (kept in cache), x streams by in panels
  // of 64 rows; W itself streams from memory once per step.
  constexpr int64_t kPanel = 64;
  pool.ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n_begin = b * kRowBlock, n_end = std::min(n, n_begin + kRowBlock);
      for (int64_t p = 0; p < m; p += kPanel) {
        const int64_t rows = std::min(kPanel, m - p);
        LinearRows(x + p * k, rows, k, weight, bias, y + p * n, n, n_begin, n_end);
      }
    }
  });
}

}  // namespace ernie::cpu
