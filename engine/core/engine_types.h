// What goes into the engine (a request of token ids and sampling parameters)
// and what comes out (per-sample token deltas). Text never enters the engine.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/backend/backend.h"
#include "engine/sample/sampler.h"
#include "engine/sample/sampling_params.h"

namespace ernie {

enum class FinishReason { kNone, kStop, kLength, kAbort };

std::string_view FinishReasonName(FinishReason r);  // "", "stop", "length", "abort"

// New tokens of one sample produced since its previous output.
struct SampleOutput {
  int32_t index = 0;                     // which of the request's n samples
  std::vector<int32_t> token_ids;
  std::vector<SampledToken> logprobs;    // parallel to token_ids when asked
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;         // cumulative for this sample
  int32_t cached_prompt_tokens = 0;      // from the prefix cache at admission
  FinishReason finish_reason = FinishReason::kNone;
  std::optional<int32_t> stop_token_id;  // the eos / stop token that ended it
};

// Receives a request's outputs. Called on the engine thread: implementations
// must not block (a stream that lags coalesces, it does not wait). After a
// call with a finish reason for every sample, or after OnError, no more calls.
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  virtual void OnOutput(const SampleOutput& output) = 0;
  // The request failed after admission (a backend error): no more outputs.
  virtual void OnError(const absl::Status& status) = 0;
};

struct EngineRequest {
  std::string request_id;               // unique among live requests
  std::vector<int32_t> prompt_token_ids;
  SamplingParams sampling;
  int32_t priority = 0;                 // lower first, FIFO within
  std::shared_ptr<RequestSink> sink;
  // When the request reached the engine's thread-safe front (EngineLoop
  // stamps it): its latency metrics start here, so the wait for the step
  // in progress counts as queue time. Unset: when EngineCore takes it.
  std::optional<std::chrono::steady_clock::time_point> arrival_time;
};

// A snapshot for routing and metrics, readable from any thread.
struct EngineLoad {
  int32_t running = 0;
  int32_t waiting = 0;
  int32_t kv_blocks_used = 0;
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_free = 0;
  int64_t prefix_queried_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t generated_tokens = 0;
  int64_t prompt_tokens_computed = 0;
  BackendStepCounters backend_steps;  // the backend's steps by how they ran (CUDA graphs or eager)
};

}  // namespace ernie
