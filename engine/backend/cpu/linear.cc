#include "engine/backend/cpu/linear.h"

#include <algorithm>

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
  for (; m0 + 2 <= m; m0 += 2) Tile<T, 2, NR>(x, m0, k, w, n0, bias, y, y_stride);
  if (m0 < m) Tile<T, 1, NR>(x, m0, k, w, n0, bias, y, y_stride);
}

template <DType T>
void RowsTyped(const float* x, int64_t m, int64_t k, const void* weight, const float* bias, float* y,
               int64_t y_stride, int64_t n_begin, int64_t n_end) {
  const auto* w = static_cast<const typename WeightLoad<T>::Elem*>(weight);
  int64_t n0 = n_begin;
  for (; n0 + 4 <= n_end; n0 += 4) Column<T, 4>(x, m, k, w, n0, bias, y, y_stride);
  for (; n0 < n_end; ++n0) Column<T, 1>(x, m, k, w, n0, bias, y, y_stride);
}

}  // namespace

void LinearRows(const float* x, int64_t m, int64_t k, const TensorView& weight, const float* bias, float* y,
                int64_t y_stride, int64_t n_begin, int64_t n_end) {
  switch (weight.dtype) {
    case DType::kF32: RowsTyped<DType::kF32>(x, m, k, weight.data(), bias, y, y_stride, n_begin, n_end); break;
    case DType::kBF16: RowsTyped<DType::kBF16>(x, m, k, weight.data(), bias, y, y_stride, n_begin, n_end); break;
    case DType::kF16: RowsTyped<DType::kF16>(x, m, k, weight.data(), bias, y, y_stride, n_begin, n_end); break;
  }
}

void Linear(const float* x, int64_t m, int64_t k, const TensorView& weight, const float* bias, float* y,
            ThreadPool& pool) {
  const int64_t n = weight.shape[0];
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
