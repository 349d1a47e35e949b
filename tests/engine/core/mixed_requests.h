// The device-sampling engine tests' requests and their collecting sink.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/core/engine_core.h"

namespace ernie {

class Collect : public RequestSink {
 public:
  void OnOutput(const SampleOutput& out) override {
    auto& s = samples[out.index];
    if (out.finish_reason != FinishReason::kNone) s.finish = out.finish_reason;
    s.completion_tokens = out.completion_tokens;
    s.tokens.insert(s.tokens.end(), out.token_ids.begin(), out.token_ids.end());
    for (const auto& t : out.logprobs) {
      s.logprobs.push_back(t.logprob.value_or(0));
      for (const auto& top : t.top_logprobs) s.top.push_back(top.token_id);
    }
  }
  void OnError(const absl::Status& s) override { error = s; }
  struct Sample {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::vector<int32_t> top;
    FinishReason finish = FinishReason::kNone;
    int32_t completion_tokens = 0;
  };
  std::map<int, Sample> samples;
  absl::Status error;
};

// Requests that exercise every device-sampling route.
inline std::vector<SamplingParams> MixedParams() {
  std::vector<SamplingParams> out;
  out.push_back({.temperature = 0.0f});                                      // greedy: device
  out.push_back({.temperature = 0.8f, .top_p = 0.8f, .seed = 7});            // device
  out.push_back({.temperature = 1.0f, .top_k = 5, .seed = 11, .n = 3});      // device, forked
  out.push_back({.temperature = 0.7f, .min_p = 0.1f, .seed = 3, .logprobs = true, .top_logprobs = 4});
  SamplingParams bias{.temperature = 0.9f, .seed = 5};                       // device: logit_bias edits
  bias.logit_bias[17] = 5.0f;
  out.push_back(bias);
  out.push_back({.temperature = 0.9f, .repetition_penalty = 1.3f, .seed = 9});  // device: penalty edits
  out.push_back({.temperature = 1.0f, .seed = 13, .min_tokens = 3, .n = 2});    // device bans
  // Greedy under strong penalties: the edits decide every token.
  out.push_back({.temperature = 0.0f, .repetition_penalty = 1.8f, .presence_penalty = 1.5f,
                 .frequency_penalty = 0.7f});
  SamplingParams forked_bias{.temperature = 1.1f, .top_k = 20, .frequency_penalty = 0.9f, .seed = 21, .n = 2};
  forked_bias.logit_bias[40] = -3.0f;
  out.push_back(forked_bias);                                                // device: a fork's shared row
  // logprobs are of the raw logits: penalized and biased rows that ask for
  // them take the device's raw pass (one greedy, so its tokens are the
  // edited argmax while its logprobs are not of it).
  out.push_back({.temperature = 0.8f, .repetition_penalty = 1.2f, .seed = 17, .logprobs = true, .top_logprobs = 2});
  SamplingParams biased_logprobs{.temperature = 0.0f, .presence_penalty = 0.8f, .logprobs = true, .top_logprobs = 3};
  biased_logprobs.logit_bias[23] = 2.5f;
  out.push_back(biased_logprobs);
  // More banned ids than the device once took in its sampling kernel (8),
  // with logprobs, under min_tokens: the engine must send the ids. (This
  // double bans through the host Sampler, which takes logprobs before its
  // processors anyway; the device's raw pass for a banned row is
  // cuda_device_sampler_test's.)
  out.push_back({.temperature = 0.9f, .seed = 29, .stop_token_ids = {4, 5, 6, 7, 8, 9, 10, 11, 12, 13},
                 .min_tokens = 4, .logprobs = true, .top_logprobs = 1});
  for (SamplingParams& p : out) p.max_tokens = 9;
  return out;
}

// Runs MixedParams' requests to the end on `backend`; the preemption count
// into `preemptions` when given.
inline std::map<std::string, Collect> RunAll(Backend* backend, int64_t* preemptions = nullptr,
                                             bool overlap_steps = true) {
  EngineConfig config{.scheduler = {.max_num_seqs = 16, .max_num_batched_tokens = 24}, .max_model_len = 64,
                      .eos_token_ids = {2}, .overlap_steps = overlap_steps};
  auto engine = EngineCore::Create(backend, config);
  EXPECT_TRUE(engine.ok()) << engine.status();
  std::map<std::string, std::shared_ptr<Collect>> sinks;
  const auto params = MixedParams();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string id = absl::StrCat("r", 100 + i);
    sinks[id] = std::make_shared<Collect>();
    std::vector<int32_t> prompt;
    for (size_t j = 0; j < 5 + 3 * i; ++j) prompt.push_back(static_cast<int32_t>(3 + (j * 31 + i * 7) % 90));
    EXPECT_TRUE((*engine)->AddRequest({.request_id = id, .prompt_token_ids = prompt, .sampling = params[i],
                                       .sink = sinks[id]})
                    .ok());
  }
  for (int step = 0; step < 500 && (*engine)->Step(); ++step) {
  }
  if (preemptions != nullptr) *preemptions = (*engine)->Load().preemptions;
  std::map<std::string, Collect> out;
  for (auto& [id, sink] : sinks) out[id] = *sink;
  return out;
}

}  // namespace ernie
