#include "tools/quantize/calibration.h"

#include <algorithm>
#include <cmath>

#include "engine/util/status_macros.h"
#include "tools/quantize/model_runner.h"

namespace ernie::quantize {

std::vector<float> MeanAbsPerColumn(const std::vector<float>& rows, int64_t cols) {
  const int64_t n = static_cast<int64_t>(rows.size()) / cols;
  std::vector<double> sum(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < cols; ++i) sum[static_cast<size_t>(i)] += std::fabs(rows[static_cast<size_t>(r * cols + i)]);
  std::vector<float> mean(static_cast<size_t>(cols));
  for (int64_t i = 0; i < cols; ++i)
    mean[static_cast<size_t>(i)] = static_cast<float>(sum[static_cast<size_t>(i)] / static_cast<double>(std::max<int64_t>(1, n)));
  return mean;
}

absl::StatusOr<std::vector<LayerActivations>> CollectActivations(const LoadedModel& model,
                                                                 const std::vector<int32_t>& tokens, int threads) {
  std::vector<LayerActivations> layers(static_cast<size_t>(model.config.num_layers));
  auto observe = [&layers](int64_t layer, cpu::LinearInput which, const float* x, int64_t rows, int64_t cols) {
    GroupActivations& g = layers[static_cast<size_t>(layer)][static_cast<size_t>(which)];
    g.cols = cols;
    g.rows.insert(g.rows.end(), x, x + rows * cols);
  };
  ERNIE_ASSIGN_OR_RETURN(auto backend,
                         CreateRunnerBackend(model, static_cast<int64_t>(tokens.size()), threads, observe));
  ERNIE_RETURN_IF_ERROR(RunSequence(*backend, tokens, kRunnerChunk, nullptr));
  for (LayerActivations& layer : layers)
    for (GroupActivations& g : layer) {
      if (g.cols != 0) g.mean_abs = MeanAbsPerColumn(g.rows, g.cols);
    }
  return layers;
}

}  // namespace ernie::quantize
