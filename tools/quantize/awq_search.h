// AWQ's per-input-channel scale search (Lin et al., "AWQ: Activation-aware
// Weight Quantization", 2023), for one group of linears that read the same
// input X (q/k/v; gate/up; o_proj; down_proj):
//   for alpha in {0, 1/N, ..., (N-1)/N}:
//     s = max(mean|x|^alpha, 1e-4), normalised by sqrt(max(s) * min(s));
//     each W_j -> Q(W_j diag(s)) diag(1/s), Q the group-wise int4 rounding;
//     loss = mean over rows and outputs of (X W_j'^T - X W_j^T)^2, summed over j;
//   keep the alpha of least loss (ties go to the smaller alpha). alpha = 0 is
//   s = 1, plain round-to-nearest, so the chosen loss is never above RTN's.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/util/thread_pool.h"

namespace ernie::quantize {

// One weight matrix of the group: [out, in] float32.
struct SearchWeight {
  const float* w = nullptr;
  int64_t out = 0;
};

struct ScaleSearchResult {
  double alpha = 0;
  std::vector<float> scales;  // [in]: multiply W's columns, divide the input (fold into the op before)
  double loss = 0;            // at the chosen alpha
  double rtn_loss = 0;        // at alpha = 0
};

// x: [rows, in] calibration inputs; mean_abs: [in] mean |x| per channel
// (over every calibration row, possibly more than `rows`).
ScaleSearchResult SearchScales(const float* x, int64_t rows, int64_t in, std::span<const float> mean_abs,
                               std::span<const SearchWeight> weights, int64_t group, int grid, ThreadPool& pool);

// The output loss of `weights` quantized after scaling by `scales` (all ones: RTN).
double QuantizationLoss(const float* x, int64_t rows, int64_t in, std::span<const float> scales,
                        std::span<const SearchWeight> weights, int64_t group, ThreadPool& pool);

}  // namespace ernie::quantize
