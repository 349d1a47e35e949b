// AWQ's calibration statistics: the float32 CPU model runs over calibration
// tokens, and the input of every dense layer's linear groups (q/k/v, o_proj,
// gate/up, down_proj; MoE layers: q/k/v, o_proj and the MoE block's input)
// is kept.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/cpu/cpu_backend.h"

namespace ernie::quantize {

// The inputs one linear group saw.
struct GroupActivations {
  int64_t cols = 0;              // input features
  std::vector<float> rows;       // [tokens, cols] float32
  std::vector<float> mean_abs;   // [cols] mean |x| over the tokens
  int64_t num_rows() const { return cols == 0 ? 0 : static_cast<int64_t>(rows.size()) / cols; }
};

// Indexed by cpu::LinearInput (kQkv, kOProj, kGateUp, kDown).
using LayerActivations = std::array<GroupActivations, 4>;

// Mean |x| of each of `cols` columns over the rows of `rows` ([n, cols]).
std::vector<float> MeanAbsPerColumn(const std::vector<float>& rows, int64_t cols);

// Runs `tokens` through `model` and returns each layer's activations.
absl::StatusOr<std::vector<LayerActivations>> CollectActivations(const LoadedModel& model,
                                                                 const std::vector<int32_t>& tokens, int threads);

}  // namespace ernie::quantize
