// AWQ's per-input-channel scale search (Lin et al., "AWQ: Activation-aware
// Weight Quantization", 2023), for one group of linears whose input is
// scaled together (q/k/v; gate/up; o_proj; down_proj; a MoE block's every
// expert gate/up):
//   for alpha in {0, 1/N, ..., (N-1)/N}:
//     s = max(mean|x|^alpha, 1e-4), normalised by sqrt(max(s) * min(s));
//     each W_j -> Q(W_j diag(s)) diag(1/s), Q the group-wise int4 rounding;
//     loss = mean over rows and outputs of (X_j W_j'^T - X_j W_j^T)^2,
//       summed over j, X_j the rows W_j reads;
//   keep the alpha of least loss (ties go to the smaller alpha). alpha = 0 is
//   s = 1, plain round-to-nearest, so the chosen loss is never above RTN's.
// The rows can differ between linears of a group: a routed expert reads only
// the calibration tokens routed to it, though its scale is the block's.
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

// Linears of a group that read the same rows x [rows, in].
struct SearchInput {
  const float* x = nullptr;
  int64_t rows = 0;
  std::vector<SearchWeight> weights;
};

struct ScaleSearchResult {
  double alpha = 0;
  std::vector<float> scales;  // [in]: multiply W's columns, divide the input (fold into the op before)
  double loss = 0;            // at the chosen alpha
  double rtn_loss = 0;        // at alpha = 0
};

// The result of no search: alpha 0, every scale 1 (RTN), losses 0.
ScaleSearchResult RoundToNearestScales(int64_t in);

// mean_abs: [in] mean |x| per channel, over every row of the group's input
// (which the inputs' rows may subset or repeat).
ScaleSearchResult SearchScales(std::span<const SearchInput> inputs, int64_t in, std::span<const float> mean_abs,
                               int64_t group, int grid, ThreadPool& pool);

// The output loss of the inputs' weights quantized after scaling by `scales`
// (all ones: RTN).
double QuantizationLoss(std::span<const SearchInput> inputs, int64_t in, std::span<const float> scales, int64_t group,
                        ThreadPool& pool);

}  // namespace ernie::quantize
