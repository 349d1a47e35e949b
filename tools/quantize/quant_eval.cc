#include "tools/quantize/quant_eval.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/ernie4_5_weights.h"
#include "engine/util/status_macros.h"
#include "nlohmann/json.hpp"
#include "tools/quantize/model_runner.h"

namespace ernie::quantize {

namespace {

// log_softmax of one row, in double.
std::vector<double> LogSoftmax(const float* row, int64_t n) {
  const double max = *std::max_element(row, row + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(row[i] - max);
  const double log_sum = std::log(sum) + max;
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = row[i] - log_sum;
  return out;
}

absl::StatusOr<std::vector<float>> AllLogits(const LoadedModel& model, const std::vector<int32_t>& tokens,
                                             int threads) {
  ERNIE_ASSIGN_OR_RETURN(auto backend, CreateRunnerBackend(model, static_cast<int64_t>(tokens.size()), threads));
  std::vector<float> logits;
  ERNIE_RETURN_IF_ERROR(RunSequence(*backend, tokens, kRunnerChunk, &logits));
  return logits;
}

}  // namespace

absl::StatusOr<QuantEvalResult> CompareWithReference(const std::string& reference_dir, const std::string& quantized_dir,
                                                     const std::string& text, int64_t max_tokens, int threads) {
  ERNIE_ASSIGN_OR_RETURN(auto reference, LoadModel(reference_dir));
  ERNIE_ASSIGN_OR_RETURN(auto quantized, LoadModel(quantized_dir));
  const int64_t vocab = reference->config.vocab_size;
  if (quantized->config.vocab_size != vocab)
    return absl::InvalidArgumentError(absl::StrCat("vocabularies differ: ", vocab, " vs ", quantized->config.vocab_size));
  ERNIE_ASSIGN_OR_RETURN(auto tokens, TokensForModel(reference_dir, text, vocab, max_tokens));
  ERNIE_ASSIGN_OR_RETURN(auto p_logits, AllLogits(*reference, tokens, threads));
  ERNIE_ASSIGN_OR_RETURN(auto q_logits, AllLogits(*quantized, tokens, threads));
  QuantEvalResult r;
  r.tokens = static_cast<int64_t>(tokens.size());
  r.reference_bytes = reference->checkpoint->total_bytes();
  r.quantized_bytes = quantized->checkpoint->total_bytes();
  int64_t agree = 0;
  for (int64_t t = 0; t < r.tokens; ++t) {
    const float* p_row = p_logits.data() + t * vocab;
    const float* q_row = q_logits.data() + t * vocab;
    const auto lp = LogSoftmax(p_row, vocab), lq = LogSoftmax(q_row, vocab);
    double kl = 0, neg_entropy = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const double p = std::exp(lp[static_cast<size_t>(v)]);
      kl += p * (lp[static_cast<size_t>(v)] - lq[static_cast<size_t>(v)]);
      neg_entropy += p * lp[static_cast<size_t>(v)];
    }
    r.uniform_kl += std::log(static_cast<double>(vocab)) + neg_entropy;
    r.mean_kl += kl;
    r.max_kl = std::max(r.max_kl, kl);
    agree += std::max_element(p_row, p_row + vocab) - p_row == std::max_element(q_row, q_row + vocab) - q_row;
  }
  r.mean_kl /= static_cast<double>(r.tokens);
  r.uniform_kl /= static_cast<double>(r.tokens);
  r.top1_agreement = static_cast<double>(agree) / static_cast<double>(r.tokens);
  return r;
}

std::string QuantEvalJson(const QuantEvalResult& r) {
  nlohmann::json j = {{"tokens", r.tokens},
                      {"mean_kl", r.mean_kl},
                      {"max_kl", r.max_kl},
                      {"top1_agreement", r.top1_agreement},
                      {"uniform_kl", r.uniform_kl},
                      {"reference_bytes", r.reference_bytes},
                      {"quantized_bytes", r.quantized_bytes}};
  return j.dump();
}

}  // namespace ernie::quantize
