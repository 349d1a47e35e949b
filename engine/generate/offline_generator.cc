#include "engine/generate/offline_generator.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "engine/sample/basic_sampler.h"
#include "engine/sample/logprobs.h"
#include "engine/util/status_macros.h"

namespace ernie {

namespace {

using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

absl::Status Validate(const Backend& backend, std::span<const int32_t> prompt, const OfflineGenerateOptions& o) {
  if (prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  for (int32_t id : prompt)
    if (id < 0 || id >= backend.vocab_size())
      return absl::InvalidArgumentError(absl::StrCat("prompt token id ", id, " is outside the vocabulary of ",
                                                     backend.vocab_size()));
  if (o.max_tokens < 1) return absl::InvalidArgumentError("max_tokens must be at least 1");
  if (o.temperature < 0) return absl::InvalidArgumentError("temperature must be >= 0");
  if (o.top_logprobs < 0 || o.top_logprobs > 20) return absl::InvalidArgumentError("top_logprobs must be in 0..20");
  if (o.prefill_chunk < 0) return absl::InvalidArgumentError("prefill chunk must be >= 0");
  const KvCacheShape& kv = backend.kv_shape();
  const int64_t needed = static_cast<int64_t>(prompt.size()) + o.max_tokens;
  if (needed > kv.num_blocks * kv.block_size)
    return absl::ResourceExhaustedError(absl::StrCat("prompt + max_tokens = ", needed, " tokens, but the KV cache holds ",
                                                     kv.num_blocks * kv.block_size));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OfflineGenerateResult> GenerateOffline(Backend& backend, std::span<const int32_t> prompt,
                                                      const OfflineGenerateOptions& o,
                                                      const LogitsObserver& observer) {
  ERNIE_RETURN_IF_ERROR(Validate(backend, prompt, o));
  const KvCacheShape& kv = backend.kv_shape();
  const int64_t vocab = backend.vocab_size();

  // The sequence's block table: the whole pool, in a seeded shuffle.
  std::vector<int32_t> block_table(static_cast<size_t>(kv.num_blocks));
  std::iota(block_table.begin(), block_table.end(), 0);
  if (o.block_order_seed != 0) std::shuffle(block_table.begin(), block_table.end(), std::mt19937_64(o.block_order_seed));

  OfflineGenerateResult result;
  result.timing.prompt_tokens = static_cast<int64_t>(prompt.size());
  std::vector<int32_t> sequence(prompt.begin(), prompt.end());
  std::vector<float> logits(static_cast<size_t>(vocab)), logprobs(static_cast<size_t>(vocab));
  std::vector<int32_t> positions;
  BasicSampler sampler(o.temperature, o.seed);
  const int64_t chunk = o.prefill_chunk > 0 ? std::min(o.prefill_chunk, backend.max_tokens_per_step())
                                            : backend.max_tokens_per_step();

  int64_t cached = 0;  // tokens already in the KV cache
  auto run_step = [&](int64_t count, bool want_logits) -> absl::Status {
    positions.resize(static_cast<size_t>(count));
    std::iota(positions.begin(), positions.end(), static_cast<int32_t>(cached));
    const int64_t total = cached + count;
    const SequenceSlice seq{.first_token = 0,
                            .num_new_tokens = static_cast<int32_t>(count),
                            .num_cached_tokens = static_cast<int32_t>(cached),
                            .block_table = std::span<const int32_t>(block_table).first(
                                static_cast<size_t>((total + kv.block_size - 1) / kv.block_size))};
    const int32_t last = static_cast<int32_t>(count - 1);
    StepBatch batch{.token_ids = std::span<const int32_t>(sequence).subspan(static_cast<size_t>(cached),
                                                                             static_cast<size_t>(count)),
                    .positions = positions,
                    .sequences = std::span<const SequenceSlice>(&seq, 1),
                    .logit_token_indices = want_logits ? std::span<const int32_t>(&last, 1)
                                                       : std::span<const int32_t>()};
    ERNIE_RETURN_IF_ERROR(backend.Forward(batch, logits));
    cached = total;
    return absl::OkStatus();
  };

  const auto prefill_start = Clock::now();
  while (cached < static_cast<int64_t>(prompt.size())) {
    const int64_t count = std::min(chunk, static_cast<int64_t>(prompt.size()) - cached);
    ERNIE_RETURN_IF_ERROR(run_step(count, cached + count == static_cast<int64_t>(prompt.size())));
    ++result.timing.prefill_steps;
  }
  result.timing.prefill_ms = MillisSince(prefill_start);

  const auto decode_start = Clock::now();
  result.finish_reason = "length";
  for (int step = 0; step < o.max_tokens; ++step) {
    if (step > 0) ERNIE_RETURN_IF_ERROR(run_step(1, true));
    if (observer) observer(logits);
    LogSoftmax(logits, logprobs);
    const int32_t token = sampler.Sample(logits);
    result.token_ids.push_back(token);
    result.logprobs.push_back(logprobs[static_cast<size_t>(token)]);
    if (o.top_logprobs > 0) result.top_logprobs.push_back(TopK(logprobs, o.top_logprobs));
    sequence.push_back(token);
    if (std::find(o.stop_token_ids.begin(), o.stop_token_ids.end(), token) != o.stop_token_ids.end()) {
      result.finish_reason = "stop";
      break;
    }
  }
  result.timing.decode_ms = MillisSince(decode_start);
  result.timing.generated_tokens = static_cast<int64_t>(result.token_ids.size());
  return result;
}

}  // namespace ernie
