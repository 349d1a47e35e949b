#include "tools/quantize/calibration.h"

#include <cmath>

#include "engine/util/status_macros.h"
#include "tools/quantize/model_runner.h"

namespace ernie::quantize {

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
      if (g.cols == 0) continue;
      std::vector<double> sum(static_cast<size_t>(g.cols), 0.0);
      for (int64_t r = 0; r < g.num_rows(); ++r)
        for (int64_t i = 0; i < g.cols; ++i) sum[static_cast<size_t>(i)] += std::fabs(g.rows[static_cast<size_t>(r * g.cols + i)]);
      g.mean_abs.resize(static_cast<size_t>(g.cols));
      for (int64_t i = 0; i < g.cols; ++i)
        g.mean_abs[static_cast<size_t>(i)] = static_cast<float>(sum[static_cast<size_t>(i)] / static_cast<double>(g.num_rows()));
    }
  return layers;
}

}  // namespace ernie::quantize
