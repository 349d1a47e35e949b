#include "tools/bench/engine_streams.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/core/engine_core.h"

namespace ernie::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Counts tokens, and notes when every request has its first.
class CountingSink : public RequestSink {
 public:
  CountingSink(int streams, int64_t* tokens, int* started, std::optional<Clock::time_point>* all_started)
      : streams_(streams), tokens_(tokens), started_(started), all_started_(all_started) {}
  void OnOutput(const SampleOutput& out) override {
    if (out.token_ids.empty()) return;
    if (*tokens_ += static_cast<int64_t>(out.token_ids.size()); !seen_) {
      seen_ = true;
      if (++*started_ == streams_) *all_started_ = Clock::now();
    }
  }
  void OnError(const absl::Status& s) override { error = s; }
  absl::Status error;

 private:
  int streams_;
  int64_t* tokens_;
  int* started_;
  std::optional<Clock::time_point>* all_started_;
  bool seen_ = false;
};

}  // namespace

absl::StatusOr<EngineStreamsResult> RunEngineStreams(Backend& backend, int streams, int prompt_len, int output_len,
                                                     bool overlap) {
  EngineConfig config{.scheduler = {.max_num_seqs = streams, .max_num_batched_tokens = 2048},
                      .max_model_len = prompt_len + output_len + 1,
                      .enable_prefix_caching = false,
                      .overlap_steps = overlap};
  auto engine = EngineCore::Create(&backend, config);
  if (!engine.ok()) return engine.status();
  int64_t tokens = 0;
  int started = 0;
  std::optional<Clock::time_point> all_started;
  std::vector<std::shared_ptr<CountingSink>> sinks;
  const int64_t vocab = backend.vocab_size();
  for (int s = 0; s < streams; ++s) {
    std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));
    for (int p = 0; p < prompt_len; ++p)
      prompt[static_cast<size_t>(p)] = static_cast<int32_t>(3 + (int64_t{s} * 7919 + int64_t{p} * 104729) % (vocab - 3));
    sinks.push_back(std::make_shared<CountingSink>(streams, &tokens, &started, &all_started));
    absl::Status added = (*engine)->AddRequest(
        {.request_id = absl::StrCat("s", s),
         .prompt_token_ids = std::move(prompt),
         .sampling = {.temperature = 0.0f, .ignore_eos = true, .max_tokens = output_len},
         .sink = sinks.back()});
    if (!added.ok()) return added;
  }
  const Clock::time_point start = Clock::now();
  while ((*engine)->Step()) {
  }
  const Clock::time_point end = Clock::now();
  for (const auto& sink : sinks)
    if (!sink->error.ok()) return sink->error;
  if (tokens != int64_t{streams} * output_len || !all_started)
    return absl::InternalError(absl::StrCat("the engine produced ", tokens, " of ", int64_t{streams} * output_len,
                                            " tokens"));
  return EngineStreamsResult{.total_s = std::chrono::duration<double>(end - start).count(),
                             .decode_s = std::chrono::duration<double>(end - *all_started).count(),
                             .output_tokens = tokens,
                             .steps = (*engine)->Load().steps,
                             .overlapped = (*engine)->overlaps_steps()};
}

}  // namespace ernie::bench
