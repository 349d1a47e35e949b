#include "tools/bench/memory_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace ernie::bench {

namespace {

// Sums the slice with wide loads; the sum is kept so the loads stay.
uint64_t ReadSlice(const uint64_t* p, int64_t n) {
#if defined(__AVX2__)
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a0);
  uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += p[i];
  return s;
#else
  uint64_t s = 0;
  for (int64_t i = 0; i < n; ++i) s += p[i];
  return s;
#endif
}

}  // namespace

BandwidthResult MeasureReadBandwidth(ThreadPool& pool, int64_t bytes, int repeats) {
  const int64_t words = bytes / 8;
  auto* buffer = static_cast<uint64_t*>(std::aligned_alloc(64, static_cast<size_t>(words) * 8));
  // Touch every page first (in parallel, so pages spread like the model's).
  pool.ParallelFor(words, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buffer[i] = static_cast<uint64_t>(i);
  });
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    pool.ParallelFor(words, 1 << 16, [&](int64_t b, int64_t e) {
      const int64_t aligned_b = (b + 3) & ~int64_t{3};
      sink += ReadSlice(buffer + aligned_b, e - aligned_b);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(words * 8) / s / 1e9);
  }
  std::free(buffer);
  return {.read_gb_per_s = best, .buffer_bytes = words * 8, .threads = pool.num_threads()};
}

}  // namespace ernie::bench
