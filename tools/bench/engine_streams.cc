#include "tools/bench/engine_streams.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/core/engine_core.h"
#include "engine/core/engine_loop.h"

namespace ernie::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Both runs' engine: no prefix cache (every prompt is computed), the
// step's token budget the worker's default.
EngineConfig BenchEngineConfig(int streams, int prompt_len, int output_len, bool overlap) {
  return {.scheduler = {.max_num_seqs = streams, .max_num_batched_tokens = 2048},
          .max_model_len = prompt_len + output_len + 1,
          .enable_prefix_caching = false,
          .overlap_steps = overlap};
}

// Request `id`'s prompt: ids that differ from every other request's.
std::vector<int32_t> DistinctPrompt(int id, int len, int64_t vocab) {
  std::vector<int32_t> prompt(static_cast<size_t>(len));
  for (int p = 0; p < len; ++p)
    prompt[static_cast<size_t>(p)] = static_cast<int32_t>(3 + (int64_t{id} * 7919 + int64_t{p} * 104729) % (vocab - 3));
  return prompt;
}

// Counts tokens, notes when every request has its first, and says when
// all are in (the sinks are called on the engine's thread).
class CountingSink : public RequestSink {
 public:
  CountingSink(int streams, int64_t total, std::atomic<int64_t>* tokens, std::atomic<int>* started,
               std::optional<Clock::time_point>* all_started, std::promise<void>* done, std::atomic<bool>* finished)
      : streams_(streams),
        total_(total),
        tokens_(tokens),
        started_(started),
        all_started_(all_started),
        done_(done),
        finished_(finished) {}
  void OnOutput(const SampleOutput& out) override {
    if (out.token_ids.empty()) return;
    if (!seen_) {
      seen_ = true;
      if (started_->fetch_add(1) + 1 == streams_) *all_started_ = Clock::now();
    }
    if (tokens_->fetch_add(static_cast<int64_t>(out.token_ids.size())) + static_cast<int64_t>(out.token_ids.size()) ==
        total_)
      Finish();
  }
  void OnError(const absl::Status& s) override {
    error = s;
    Finish();
  }
  absl::Status error;

 private:
  int streams_;
  int64_t total_;
  std::atomic<int64_t>* tokens_;
  std::atomic<int>* started_;
  std::optional<Clock::time_point>* all_started_;
  std::promise<void>* done_;
  std::atomic<bool>* finished_;
  bool seen_ = false;

  void Finish() {
    if (!finished_->exchange(true)) done_->set_value();
  }
};

}  // namespace

absl::StatusOr<EngineStreamsResult> RunEngineStreams(Backend& backend, int streams, int prompt_len, int output_len,
                                                     bool overlap, bool through_loop) {
  auto engine = EngineCore::Create(&backend, BenchEngineConfig(streams, prompt_len, output_len, overlap));
  if (!engine.ok()) return engine.status();
  std::atomic<int64_t> tokens = 0;
  std::atomic<int> started = 0;
  std::optional<Clock::time_point> all_started;
  std::vector<std::shared_ptr<CountingSink>> sinks;
  std::vector<EngineRequest> requests;
  const int64_t vocab = backend.vocab_size();
  const int64_t total = int64_t{streams} * output_len;
  std::promise<void> done;
  std::atomic<bool> finished = false;
  for (int s = 0; s < streams; ++s) {
    std::vector<int32_t> prompt = DistinctPrompt(s, prompt_len, vocab);
    sinks.push_back(std::make_shared<CountingSink>(streams, total, &tokens, &started, &all_started, &done, &finished));
    requests.push_back({.request_id = absl::StrCat("s", s),
                        .prompt_token_ids = std::move(prompt),
                        .sampling = {.temperature = 0.0f, .ignore_eos = true, .max_tokens = output_len},
                        .sink = sinks.back()});
  }
  const Clock::time_point start = Clock::now();
  int64_t steps = 0;
  bool overlapped = (*engine)->overlaps_steps();
  if (through_loop) {
    EngineLoop loop(std::move(*engine));
    // As the worker does: without waiting for each verdict.
    std::atomic<int> refused = 0;
    for (EngineRequest& r : requests)
      loop.SubmitAsync(std::move(r), [&refused](const absl::Status& s) { refused += s.ok() ? 0 : 1; });
    done.get_future().wait();
    if (refused > 0) return absl::InternalError(absl::StrCat(refused.load(), " requests were refused"));
    steps = loop.Load().steps;
  } else {
    for (EngineRequest& r : requests) {
      if (absl::Status added = (*engine)->AddRequest(std::move(r)); !added.ok()) return added;
    }
    while ((*engine)->Step()) {
    }
    steps = (*engine)->Load().steps;
  }
  const Clock::time_point end = Clock::now();
  for (const auto& sink : sinks)
    if (!sink->error.ok()) return sink->error;
  if (tokens != total || !all_started)
    return absl::InternalError(absl::StrCat("the engine produced ", tokens.load(), " of ", total, " tokens"));
  return EngineStreamsResult{.total_s = std::chrono::duration<double>(end - start).count(),
                             .decode_s = std::chrono::duration<double>(end - *all_started).count(),
                             .output_tokens = tokens,
                             .steps = steps,
                             .overlapped = overlapped};
}

namespace {

// One request's first token: the engine step and the time it came.
class FirstTokenSink : public RequestSink {
 public:
  explicit FirstTokenSink(const int64_t* step) : step_(step), added_step_(*step), added_(Clock::now()) {}
  void OnOutput(const SampleOutput& out) override {
    if (!out.token_ids.empty() && first_step_ < 0) {
      first_step_ = *step_;
      first_ = Clock::now();
    }
    if (out.finish_reason != FinishReason::kNone) done_ = true;
  }
  void OnError(const absl::Status& s) override {
    error = s;
    done_ = true;
  }
  bool done() const { return done_; }
  bool started() const { return first_step_ >= 0; }
  int64_t steps_to_first() const { return first_step_ - added_step_; }
  double ms_to_first() const { return std::chrono::duration<double, std::milli>(first_ - added_).count(); }
  absl::Status error;

 private:
  const int64_t* step_;
  int64_t added_step_;
  Clock::time_point added_;
  int64_t first_step_ = -1;
  Clock::time_point first_;
  bool done_ = false;
};

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace

absl::StatusOr<SteadyArrivalsResult> RunSteadyArrivals(Backend& backend, int streams, int per_stream, int prompt_len,
                                                       int output_len, bool overlap) {
  if (per_stream < 2 || output_len < 16)
    return absl::InvalidArgumentError("steady arrivals need 2 requests a stream and outputs of 16 tokens or more");
  auto engine = EngineCore::Create(&backend, BenchEngineConfig(streams, prompt_len, output_len, overlap));
  if (!engine.ok()) return engine.status();
  const int64_t vocab = backend.vocab_size();
  int64_t step = 0;
  int next_id = 0;
  std::vector<std::shared_ptr<FirstTokenSink>> all, current(static_cast<size_t>(streams));
  std::vector<int> sent(static_cast<size_t>(streams), 0);
  auto send = [&](int s) -> absl::Status {
    auto sink = std::make_shared<FirstTokenSink>(&step);
    std::vector<int32_t> prompt = DistinctPrompt(next_id, prompt_len, vocab);
    // Up to 15 tokens shorter by stream: the first wave's finishes spread.
    const int max_tokens = output_len - s % 16;
    current[static_cast<size_t>(s)] = sink;
    all.push_back(sink);
    ++sent[static_cast<size_t>(s)];
    return (*engine)->AddRequest({.request_id = absl::StrCat("r", next_id++),
                                  .prompt_token_ids = std::move(prompt),
                                  .sampling = {.temperature = 0.0f, .ignore_eos = true, .max_tokens = max_tokens},
                                  .sink = sink});
  };
  for (int s = 0; s < streams; ++s) {
    if (absl::Status added = send(s); !added.ok()) return added;
  }
  const bool overlapped = (*engine)->overlaps_steps();
  while (true) {
    const bool stepped = (*engine)->Step();
    ++step;
    bool waiting = false;
    for (int s = 0; s < streams; ++s) {
      const auto& sink = current[static_cast<size_t>(s)];
      if (!sink->error.ok()) return sink->error;
      if (sink->done() && sent[static_cast<size_t>(s)] < per_stream) {
        if (absl::Status added = send(s); !added.ok()) return added;
      }
      waiting = waiting || !current[static_cast<size_t>(s)]->done();
    }
    if (!stepped && !waiting) break;
    if (!stepped) return absl::InternalError("the engine stopped with requests unfinished");
  }
  std::vector<double> steps_to_first, ms_to_first;
  for (size_t i = static_cast<size_t>(streams); i < all.size(); ++i) {
    if (!all[i]->started()) return absl::InternalError("a request finished without a token");
    steps_to_first.push_back(static_cast<double>(all[i]->steps_to_first()));
    ms_to_first.push_back(all[i]->ms_to_first());
  }
  return SteadyArrivalsResult{.requests = static_cast<int64_t>(steps_to_first.size()),
                              .steps = step,
                              .ttft_steps_p50 = Percentile(steps_to_first, 0.5),
                              .ttft_steps_p90 = Percentile(steps_to_first, 0.9),
                              .ttft_ms_p50 = Percentile(ms_to_first, 0.5),
                              .ttft_ms_p90 = Percentile(ms_to_first, 0.9),
                              .overlapped = overlapped};
}

}  // namespace ernie::bench
