#include "tools/quantize/awq_search.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "engine/backend/cpu/linear.h"
#include "engine/model/tensor_view.h"
#include "tools/quantize/group_quantizer.h"

namespace ernie::quantize {

namespace {

// Buffers a search reuses for every alpha and weight. They are written
// before they are read, so they grow without being cleared (zeroing a
// 12,288 x 2,560 error matrix for every candidate cost more than rounding it).
struct LossScratch {
  std::unique_ptr<float[]> delta, y;
  size_t delta_size = 0, y_size = 0;
  static float* Grow(std::unique_ptr<float[]>& buffer, size_t& size, size_t n) {
    if (size < n) {
      buffer.reset(new float[n]);  // uninitialised on purpose
      size = n;
    }
    return buffer.get();
  }
};

// X D^T summed in squares, D = [out, in] float32, through the engine's linear.
double SquaredOutput(const float* x, int64_t rows, int64_t in, const float* d, int64_t out, ThreadPool& pool,
                     LossScratch& scratch) {
  TensorView view;
  view.name = "awq_search.delta";
  view.dtype = DType::kF32;
  view.shape = {out, in};
  view.bytes = std::span(reinterpret_cast<const uint8_t*>(d), static_cast<size_t>(out * in) * sizeof(float));
  const auto n = static_cast<size_t>(rows * out);
  float* y = LossScratch::Grow(scratch.y, scratch.y_size, n);
  cpu::Linear(x, rows, in, view, nullptr, y, pool);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(y[i]) * y[i];
  return sum;
}

// Q(W s) / s - W, the error the input sees, rows split over the pool: every
// candidate alpha re-rounds each weight of the group, the search's bulk.
void WeightError(const SearchWeight& sw, int64_t in, std::span<const float> scales, int64_t group, ThreadPool& pool,
                 float* delta) {
  pool.ParallelFor(sw.out, 16, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const float* w = sw.w + o * in;
      float* d = delta + o * in;
      for (int64_t i = 0; i < in; ++i) d[i] = w[i] * scales[static_cast<size_t>(i)];
      QuantizeDequantizeRows(d, 1, in, group, d);
      for (int64_t i = 0; i < in; ++i) d[i] = d[i] / scales[static_cast<size_t>(i)] - w[i];
    }
  });
}

}  // namespace

ScaleSearchResult RoundToNearestScales(int64_t in) {
  ScaleSearchResult r;
  r.scales.assign(static_cast<size_t>(in), 1.0f);
  return r;
}

namespace {

double Loss(std::span<const SearchInput> inputs, int64_t in, std::span<const float> scales, int64_t group,
            ThreadPool& pool, LossScratch& scratch) {
  double total = 0;
  int64_t outputs = 0;
  for (const SearchInput& input : inputs) {
    if (input.rows == 0) continue;  // no row reads these weights: nothing to see
    for (const SearchWeight& sw : input.weights) {
      float* delta = LossScratch::Grow(scratch.delta, scratch.delta_size, static_cast<size_t>(sw.out * in));
      WeightError(sw, in, scales, group, pool, delta);
      total += SquaredOutput(input.x, input.rows, in, delta, sw.out, pool, scratch);
      outputs += input.rows * sw.out;
    }
  }
  return total / static_cast<double>(std::max<int64_t>(1, outputs));
}

}  // namespace

double QuantizationLoss(std::span<const SearchInput> inputs, int64_t in, std::span<const float> scales, int64_t group,
                        ThreadPool& pool) {
  LossScratch scratch;
  return Loss(inputs, in, scales, group, pool, scratch);
}

ScaleSearchResult SearchScales(std::span<const SearchInput> inputs, int64_t in, std::span<const float> mean_abs,
                               int64_t group, int grid, ThreadPool& pool) {
  ScaleSearchResult best;
  LossScratch scratch;
  std::vector<float> s(static_cast<size_t>(in));
  for (int step = 0; step < grid; ++step) {
    const double alpha = static_cast<double>(step) / grid;
    for (int64_t i = 0; i < in; ++i)
      s[static_cast<size_t>(i)] = std::max(static_cast<float>(std::pow(mean_abs[static_cast<size_t>(i)], alpha)), 1e-4f);
    const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
    const float norm = std::sqrt(*lo * *hi);
    for (float& v : s) v /= norm;
    if (step == 0) std::fill(s.begin(), s.end(), 1.0f);  // alpha 0 is exactly RTN
    const double loss = Loss(inputs, in, s, group, pool, scratch);
    if (step == 0) best.rtn_loss = loss;
    if (step == 0 || loss < best.loss) {
      best.alpha = alpha;
      best.loss = loss;
      best.scales = s;
    }
  }
  return best;
}

}  // namespace ernie::quantize
