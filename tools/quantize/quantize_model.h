// ernie-quantize's work: a float ERNIE-4.5 checkpoint in, an AutoAWQ "gemm"
// checkpoint out (quantization_config in config.json, each q/k/v/o/gate/up/
// down linear as qweight/qzeros/scales; embeddings, lm_head, norms and the
// MoE router stay float; tokenizer and generation_config.json copied).
//
// --method awq: scales from calibration (awq_search.h) are folded exactly as
// AutoAWQ folds them, since the format has no place for them:
//   q/k/v   <- input_layernorm.weight / s      (q/k/v columns * s)
//   gate/up <- post_attention_layernorm / s    (gate/up columns * s)
//   down    <- up_proj's output rows / s       (down columns * s)
//   o_proj  <- v_proj's output rows / s, only when heads map 1:1 onto KV
//              heads (num_heads == num_kv_heads); otherwise o_proj is RTN.
// MoE layers (moe_awq.h): attention as above; one s for the block's input
// (post_attention_layernorm / s, the router's and every expert's gate/up
// columns * s, the router written in float32), and one for each expert's
// down_proj (that expert's up_proj rows / s).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "tools/quantize/quantize_options.h"

namespace ernie::quantize {

// Writes options.output_dir. Progress (layer i/N, elapsed seconds, the alpha
// chosen per linear group and its loss against RTN's) goes to stderr.
absl::Status QuantizeModel(const QuantizeOptions& options);

}  // namespace ernie::quantize
