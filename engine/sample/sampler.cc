#include "engine/sample/sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/sample/fast_exp.h"
#include "engine/sample/logits_processors.h"
#include "engine/sample/logprobs.h"
#include "engine/sample/philox.h"
#include "engine/sample/row_max.h"
#include "engine/util/status_macros.h"

namespace ernie {
namespace {

// Index of the largest value, the smaller id on ties; -1 when no value is
// finite (all -inf or NaN, or a +inf from a broken step). Two vectorizable
// passes, O(vocab).
int32_t ArgmaxSmallestId(std::span<const float> values) {
  const float best = RowMax(values);
  if (!std::isfinite(best)) return -1;
  return static_cast<int32_t>(std::find(values.begin(), values.end(), best) - values.begin());
}

// log(sum(exp(values))), given their maximum (finite).
float LogSumExp(std::span<const float> values, float max_value) {
  // Independent accumulators break the add chain; the exps vectorize.
  constexpr size_t kLanes = 8;
  std::array<double, kLanes> sums{};
  size_t i = 0;
  for (; i + kLanes <= values.size(); i += kLanes) {
    for (size_t lane = 0; lane < kLanes; ++lane) sums[lane] += FastExpNonPositive(values[i + lane] - max_value);
  }
  for (; i < values.size(); ++i) sums[0] += FastExpNonPositive(values[i] - max_value);
  double total = 0.0;
  for (double sum : sums) total += sum;
  return max_value + static_cast<float>(std::log(total));
}

absl::Status NoFiniteLogit(size_t row_index) {
  return absl::InvalidArgumentError(absl::StrCat("logits row ", row_index,
                                                 " has no finite value after processing (all -inf or NaN)"));
}

}  // namespace

uint64_t RequestSeed(const SamplingParams& params) {
  return params.seed.has_value() ? *params.seed : DrawRequestSeed();
}

absl::StatusOr<Sampler> Sampler::Create(SamplerOptions options) {
  if (options.vocab_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size must be at least 1, got ", options.vocab_size));
  }
  for (int32_t id : options.eos_token_ids) {
    if (id < 0 || id >= options.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("eos_token_ids contains token id ", id,
                                                     ", outside the vocabulary [0, ", options.vocab_size, ")"));
    }
  }
  return Sampler(std::move(options));
}

absl::StatusOr<std::vector<SampledToken>> Sampler::Sample(std::span<float> logits,
                                                          std::span<const SamplerRow> rows) {
  std::vector<const SamplerRow*> pointers;
  pointers.reserve(rows.size());
  for (const SamplerRow& row : rows) pointers.push_back(&row);
  return Sample(logits, std::span<const SamplerRow* const>(pointers));
}

absl::StatusOr<std::vector<SampledToken>> Sampler::Sample(std::span<float> logits,
                                                          std::span<const SamplerRow* const> rows) {
  const auto vocab = static_cast<size_t>(options_.vocab_size);
  if (logits.size() != rows.size() * vocab) {
    return absl::InvalidArgumentError(absl::StrCat("logits must hold rows x vocab_size = ", rows.size(), " x ",
                                                   vocab, " values, got ", logits.size()));
  }
  std::vector<SampledToken> results;
  results.reserve(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r] == nullptr || rows[r]->params == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("sampler row ", r, " has no sampling params"));
    }
    ERNIE_ASSIGN_OR_RETURN(SampledToken token, SampleRow(logits.subspan(r * vocab, vocab), *rows[r], r));
    results.push_back(std::move(token));
  }
  return results;
}

absl::StatusOr<SampledToken> Sampler::SampleRow(std::span<float> logits, const SamplerRow& row,
                                                size_t row_index) {
  const SamplingParams& params = *row.params;
  SampledToken result;
  float raw_log_normalizer = 0.0f;
  if (params.logprobs) {
    raw_logits_.assign(logits.begin(), logits.end());
    const float raw_max = RowMax(raw_logits_);
    if (!std::isfinite(raw_max)) return NoFiniteLogit(row_index);
    raw_log_normalizer = LogSumExp(raw_logits_, raw_max);
    for (const auto& [id, logit] : TopK(raw_logits_, params.top_logprobs)) {
      result.top_logprobs.push_back({.token_id = id, .logprob = logit - raw_log_normalizer});
    }
  }

  ApplyLogitsProcessors(params, options_.eos_token_ids, row.prompt_tokens.get(), row.output, logits);

  if (IsGreedy(params)) {
    result.token_id = ArgmaxSmallestId(logits);
    if (result.token_id < 0) return NoFiniteLogit(row_index);
  } else {
    if (!std::isfinite(RowMax(logits))) return NoFiniteLogit(row_index);
    distribution_.Build(logits, {.temperature = params.temperature,
                                 .top_k = params.top_k,
                                 .top_p = params.top_p,
                                 .min_p = params.min_p});
    const auto position = static_cast<uint64_t>(row.output.num_tokens());
    result.token_id = distribution_.Draw(SamplingUniform(row.seed, row.sample_index, position));
  }
  if (params.logprobs) result.logprob = raw_logits_[static_cast<size_t>(result.token_id)] - raw_log_normalizer;
  return result;
}

}  // namespace ernie
