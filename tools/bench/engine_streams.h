// The engine over a backend, timed as a user sees it: S requests (a prompt
// of P distinct token ids each, greedy, ignoring eos, O output tokens) added
// at once and stepped to the end by EngineCore, one step at a time or with
// overlapped steps (EngineConfig::overlap_steps). Unlike the step figures of
// ernie-bench-cuda, this includes everything the engine's thread does
// between steps: scheduling, building batches, reading and delivering tokens.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"

namespace ernie::bench {

struct EngineStreamsResult {
  double total_s = 0;          // first step to the last token
  double decode_s = 0;         // from when every request has its first token
  int64_t output_tokens = 0;
  int64_t steps = 0;
  bool overlapped = false;     // the engine did overlap its steps
  double tok_s() const { return output_tokens / total_s; }
  // Tokens after each request's first, over decode_s.
  double decode_tok_s(int streams) const { return (output_tokens - streams) / decode_s; }
};

// `through_loop`: the engine runs on an EngineLoop thread and the requests
// come in through SubmitAsync, as in the worker, rather than Step() called
// back to back on this thread.
absl::StatusOr<EngineStreamsResult> RunEngineStreams(Backend& backend, int streams, int prompt_len, int output_len,
                                                     bool overlap, bool through_loop = false);

// Steady arrivals, as a serving benchmark's client makes them: `streams`
// requests run at once and each stream sends its next request as soon as
// its last one has finished (between two Step() calls), `per_stream` in all;
// output lengths are staggered by stream so arrivals spread over steps.
// Times to first token of the requests after the first wave, in engine
// steps and in milliseconds, from AddRequest to the first token's delivery.
struct SteadyArrivalsResult {
  int64_t requests = 0;  // measured (the first wave is not)
  int64_t steps = 0;
  double ttft_steps_p50 = 0, ttft_steps_p90 = 0;
  double ttft_ms_p50 = 0, ttft_ms_p90 = 0;
  bool overlapped = false;
};
absl::StatusOr<SteadyArrivalsResult> RunSteadyArrivals(Backend& backend, int streams, int per_stream, int prompt_len,
                                                       int output_len, bool overlap);

}  // namespace ernie::bench
