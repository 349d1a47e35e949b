// Per-row cost of the serving sampler (engine/sample/sampler.h) at ERNIE-4.5's
// vocabulary of 103,424 logits, for the common parameter sets. Each iteration
// samples one row; the logits are restored from a pristine copy outside the
// timed region because the sampler processes them in place.
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "engine/sample/sampler.h"

namespace ernie {
namespace {

constexpr int32_t kVocab = 103424;

// stddev 2: a fairly flat row, like a random-weight model's, where top_p 0.8
// keeps tens of thousands of tokens. stddev 8: a peaked row, like a trained
// model's, where it keeps a handful.
std::vector<float> BenchLogits(float stddev) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> logits(kVocab);
  for (float& logit : logits) logit = normal(rng);
  return logits;
}

void RunSampler(benchmark::State& state, const SamplingParams& params, float stddev) {
  absl::StatusOr<Sampler> sampler = Sampler::Create({.vocab_size = kVocab, .eos_token_ids = {2}});
  if (!sampler.ok()) {
    state.SkipWithError(sampler.status().ToString().c_str());
    return;
  }
  const std::vector<float> pristine = BenchLogits(stddev);
  std::vector<float> logits = pristine;
  SamplerRow row{.params = &params, .seed = 7};
  std::vector<int32_t> prompt(512);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 7919) % kVocab);
  row.prompt_tokens = std::make_shared<PromptTokenSet>(prompt);
  for (int i = 0; i < 64; ++i) row.output.Add((i * 104729) % kVocab);
  for (auto _ : state) {
    state.PauseTiming();
    logits = pristine;
    state.ResumeTiming();
    absl::StatusOr<std::vector<SampledToken>> tokens = sampler->Sample(logits, std::span<const SamplerRow>(&row, 1));
    benchmark::DoNotOptimize(tokens);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Greedy(benchmark::State& state) { RunSampler(state, {.temperature = 0.0f}, 2.0f); }
void BM_TemperatureTopP_Flat(benchmark::State& state) {
  RunSampler(state, {.temperature = 0.8f, .top_p = 0.8f}, 2.0f);
}
void BM_TemperatureTopP_Peaked(benchmark::State& state) {
  RunSampler(state, {.temperature = 0.8f, .top_p = 0.8f}, 8.0f);
}
void BM_Temperature(benchmark::State& state) { RunSampler(state, {.temperature = 1.0f}, 2.0f); }
void BM_TopKTopP(benchmark::State& state) {
  RunSampler(state, {.temperature = 0.7f, .top_p = 0.9f, .top_k = 50}, 2.0f);
}
void BM_PenaltiesMinP(benchmark::State& state) {
  RunSampler(state,
             {.temperature = 0.8f, .top_p = 0.8f, .min_p = 0.05f, .repetition_penalty = 1.1f,
              .presence_penalty = 0.5f, .frequency_penalty = 0.5f},
             2.0f);
}
void BM_TopLogprobs(benchmark::State& state) {
  RunSampler(state, {.temperature = 0.8f, .top_p = 0.8f, .logprobs = true, .top_logprobs = 20}, 2.0f);
}

BENCHMARK(BM_Greedy);
BENCHMARK(BM_TemperatureTopP_Flat);
BENCHMARK(BM_TemperatureTopP_Peaked);
BENCHMARK(BM_Temperature);
BENCHMARK(BM_TopKTopP);
BENCHMARK(BM_PenaltiesMinP);
BENCHMARK(BM_TopLogprobs);

}  // namespace
}  // namespace ernie

BENCHMARK_MAIN();
