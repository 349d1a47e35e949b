#include "tools/quantize/awq_search.h"

#include <algorithm>
#include <cmath>

#include "engine/backend/cpu/linear.h"
#include "engine/model/tensor_view.h"
#include "tools/quantize/group_quantizer.h"

namespace ernie::quantize {

namespace {

// X D^T summed in squares, D = [out, in] float32, through the engine's linear.
double SquaredOutput(const float* x, int64_t rows, int64_t in, const std::vector<float>& d, int64_t out,
                     ThreadPool& pool) {
  TensorView view;
  view.name = "awq_search.delta";
  view.dtype = DType::kF32;
  view.shape = {out, in};
  view.bytes = std::span(reinterpret_cast<const uint8_t*>(d.data()), d.size() * sizeof(float));
  std::vector<float> y(static_cast<size_t>(rows * out));
  cpu::Linear(x, rows, in, view, nullptr, y.data(), pool);
  double sum = 0;
  for (float v : y) sum += static_cast<double>(v) * v;
  return sum;
}

}  // namespace

double QuantizationLoss(const float* x, int64_t rows, int64_t in, std::span<const float> scales,
                        std::span<const SearchWeight> weights, int64_t group, ThreadPool& pool) {
  double total = 0;
  int64_t outputs = 0;
  for (const SearchWeight& sw : weights) {
    const int64_t out = sw.out;
    std::vector<float> scaled(static_cast<size_t>(out * in)), delta(static_cast<size_t>(out * in));
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) scaled[static_cast<size_t>(o * in + i)] = sw.w[o * in + i] * scales[static_cast<size_t>(i)];
    DequantizeToOutIn(QuantizeGroupwise(scaled.data(), out, in, group), delta.data());
    // The effective weight is Q(W s) / s; its error against W is what X sees.
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        const auto k = static_cast<size_t>(o * in + i);
        delta[k] = delta[k] / scales[static_cast<size_t>(i)] - sw.w[o * in + i];
      }
    total += SquaredOutput(x, rows, in, delta, out, pool);
    outputs += out;
  }
  return total / static_cast<double>(std::max<int64_t>(1, rows * outputs));
}

ScaleSearchResult SearchScales(const float* x, int64_t rows, int64_t in, std::span<const float> mean_abs,
                               std::span<const SearchWeight> weights, int64_t group, int grid, ThreadPool& pool) {
  ScaleSearchResult best;
  std::vector<float> s(static_cast<size_t>(in));
  for (int step = 0; step < grid; ++step) {
    const double alpha = static_cast<double>(step) / grid;
    for (int64_t i = 0; i < in; ++i)
      s[static_cast<size_t>(i)] = std::max(static_cast<float>(std::pow(mean_abs[static_cast<size_t>(i)], alpha)), 1e-4f);
    const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
    const float norm = std::sqrt(*lo * *hi);
    for (float& v : s) v /= norm;
    if (step == 0) std::fill(s.begin(), s.end(), 1.0f);  // alpha 0 is exactly RTN
    const double loss = QuantizationLoss(x, rows, in, s, weights, group, pool);
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
