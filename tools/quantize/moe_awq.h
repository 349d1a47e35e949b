// AWQ for a mixture-of-experts MLP (ERNIE-4.5's Ernie4_5_MoeSparseMoeBlock,
// engine/backend/cpu/moe_block.h), as AutoAWQ treats its MoE models:
// - The block's input is one tensor, the post-attention RMSNorm's output,
//   which the router, every routed expert's gate/up and the shared experts'
//   gate/up all read. So they share one scale s: it is searched over all of
//   them at once (each routed expert's error on the calibration tokens routed
//   to it, the shared experts' on every token), folded into the norm's
//   weight (divided) and the router's columns (multiplied; the router is
//   not quantized, so this keeps its logits).
// - Each expert's down_proj reads that expert's own SiLU product: a scale of
//   its own, searched on its routed tokens and folded into its up_proj rows.
//   An expert no calibration token reached keeps RTN (all ones).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/model/ernie4_5_weights.h"
#include "engine/model/model_config.h"
#include "engine/util/thread_pool.h"
#include "tools/quantize/awq_search.h"
#include "tools/quantize/calibration.h"
#include "tools/quantize/float_linear.h"

namespace ernie::quantize {

struct FloatMlp {
  FloatLinear gate, up, down;
};

// A MoE block's weights in float32 (the router too), while they are scaled.
struct FloatMoeMlp {
  std::vector<FloatMlp> experts;
  std::optional<FloatMlp> shared;
  std::vector<float> router;  // [E, H]
};

FloatMoeMlp LoadFloatMoeMlp(const MoeLayerWeights& w);

struct MoeMlpScales {
  ScaleSearchResult gate_up;             // the block's input, [H]
  std::vector<ScaleSearchResult> down;   // each routed expert's SiLU product, [width]
  std::optional<ScaleSearchResult> shared_down;
  std::vector<int64_t> routed_rows;      // calibration tokens each routed expert saw
};

// `input`: the block's input on the calibration tokens (kGateUp). Routes
// them with the layer's own router, as the model does.
MoeMlpScales SearchMoeMlpScales(const ModelConfig& config, const MoeLayerWeights& w, const GroupActivations& input,
                                const FloatMoeMlp& f, int64_t group, int grid, ThreadPool& pool);

// Scales `f` by `s` (gate/up and router columns by the input's scale; each
// up_proj's rows and bias divided, its down_proj's columns multiplied by
// that expert's). The caller divides the norm's weight by s.gate_up.scales.
void ApplyMoeMlpScales(const MoeMlpScales& s, FloatMoeMlp& f);

}  // namespace ernie::quantize
