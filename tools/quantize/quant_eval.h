// How far a quantized model's next-token distributions sit from its float
// original on held-out text: both run on the CPU backend in float32 over
// the same tokens, and at every position
//   KL(p_float || p_quant) = sum_v p_float(v) (log p_float(v) - log p_quant(v)).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ernie::quantize {

struct QuantEvalResult {
  int64_t tokens = 0;           // positions compared
  double mean_kl = 0;           // nats, mean over positions
  double max_kl = 0;            // nats, worst position
  double top1_agreement = 0;    // fraction of positions with the same argmax
  // Mean KL(p_float || uniform) = log V - H(p_float): what knowing nothing
  // costs, the scale mean_kl is read against.
  double uniform_kl = 0;
  int64_t reference_bytes = 0;  // tensor bytes of each checkpoint
  int64_t quantized_bytes = 0;
};

// Tokens of `text` (at most `max_tokens`) come from the reference's tokenizer
// (model_runner.h's TokensForModel). The two models must share the vocabulary.
absl::StatusOr<QuantEvalResult> CompareWithReference(const std::string& reference_dir, const std::string& quantized_dir,
                                                     const std::string& text, int64_t max_tokens, int threads);

// {"tokens": ..., "mean_kl": ..., ...} on one line.
std::string QuantEvalJson(const QuantEvalResult& r);

}  // namespace ernie::quantize
