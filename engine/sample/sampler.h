// The sampler of the serving path: one call per engine step turns the logits
// of the rows that need a token into tokens (and their log-probabilities).
//
// Per row, in vLLM's order: logit_bias; the min_tokens ban of eos and stop
// ids; repetition, frequency and presence penalties; then either greedy
// (argmax, ties to the smaller id) or temperature -> min_p -> top_k -> top_p
// -> one draw from a counter-based generator keyed by (seed, sample index,
// output position). Rows are independent: the same seed gives the same
// tokens whatever else is in the batch and in whatever order rows come.
//
// Logprobs are the log-softmax of the RAW logits, before any processor or
// temperature (vLLM's default logprobs_mode "raw_logprobs").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/sample/sampling_params.h"
#include "engine/sample/token_counts.h"
#include "engine/sample/truncated_distribution.h"

namespace ernie {

// What the caller keeps for each sample (one of a request's n) for its whole
// life, e.g. in the sequence's slot. After each step it records the token it
// keeps with `output.Add(token)`; the sampler only reads rows.
struct SamplerRow {
  const SamplingParams* params = nullptr;  // the request's; must outlive the row
  uint64_t seed = 0;                       // RequestSeed(*params), once per request
  uint32_t sample_index = 0;               // 0 .. params->n - 1
  // The prompt's distinct tokens, shared by the request's samples; read only
  // for repetition_penalty != 1, may be null otherwise.
  std::shared_ptr<const PromptTokenSet> prompt_tokens;
  OutputTokenCounts output;  // tokens so far; output.num_tokens() is the draw's position
};

// The request's seed, or a fresh one from DrawRequestSeed() when it has none.
// Call once per request at admission and give every sample the same value.
uint64_t RequestSeed(const SamplingParams& params);

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  int32_t token_id = 0;
  std::optional<float> logprob;            // set when params->logprobs
  std::vector<TokenLogprob> top_logprobs;  // params->top_logprobs entries, best first
                                           // (ties to the smaller id)
};

struct SamplerOptions {
  int32_t vocab_size = 0;              // logits per row
  std::vector<int32_t> eos_token_ids;  // the model's end ids, banned under min_tokens
};

// Owns the scratch buffers (a few vocab-sized vectors, grown once), so it is
// not thread-safe: one Sampler per engine thread.
class Sampler {
 public:
  static absl::StatusOr<Sampler> Create(SamplerOptions options);

  // logits: [rows.size(), vocab_size], row-major; each row is modified in place
  // (bias, bans and penalties applied; temperature and truncation are not
  // written back). Returns one SampledToken per row, in row order.
  // InvalidArgument for a size mismatch, a row without params, or a row whose
  // processed logits have no finite value (a broken model step).
  absl::StatusOr<std::vector<SampledToken>> Sample(std::span<float> logits, std::span<const SamplerRow> rows);
  // The same, for callers whose rows live in their own slots.
  absl::StatusOr<std::vector<SampledToken>> Sample(std::span<float> logits,
                                                   std::span<const SamplerRow* const> rows);

  int32_t vocab_size() const { return options_.vocab_size; }

 private:
  explicit Sampler(SamplerOptions options) : options_(std::move(options)) {}

  absl::StatusOr<SampledToken> SampleRow(std::span<float> logits, const SamplerRow& row, size_t row_index);

  SamplerOptions options_;
  std::vector<float> raw_logits_;        // [vocab] copy of a row before processing, for its logprobs
  TruncatedDistribution distribution_;  // workspace of the random draw
};

}  // namespace ernie
