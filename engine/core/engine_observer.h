// What the engine reports as it runs, for whoever turns it into metrics (the
// worker). The engine knows nothing of Prometheus: it calls these plain
// hooks on its own thread, so implementations must be cheap and must not
// block (atomics, no locks per token). Times are steady_clock seconds.
#pragma once

#include <cstdint>

#include "engine/core/engine_types.h"

namespace ernie {

// One executed step (a forward pass over the scheduled chunks).
struct StepStats {
  int32_t num_sequences = 0;       // rows in the batch
  int32_t num_tokens = 0;          // tokens computed (prefill + decode)
  int32_t num_prefill_tokens = 0;  // of which prompt tokens
  // Schedule + forward + sampling + delivery: from the step's start, or,
  // with overlapped steps, from when the step before it was read (so
  // durations add up to wall time).
  double duration_s = 0;
  // Of which inside the backend's calls for it (forward and device sampling;
  // overlapped: its launch and its wait).
  double model_s = 0;
};

// One sample that has finished (n > 1 requests finish n of these, as vLLM
// counts each child sequence). Phases as vLLM defines them.
struct FinishedSampleStats {
  FinishReason finish_reason = FinishReason::kNone;  // stop, length or abort
  bool failed = false;               // a backend error ended it (finish_reason is kAbort)
  int32_t prompt_tokens = 0;
  int32_t generation_tokens = 0;
  bool scheduled = false;            // it reached a batch (else only queue_s is meaningful)
  bool produced_tokens = false;      // it got a first token
  double queue_s = 0;                // arrival -> first scheduled
  double prefill_s = 0;              // first scheduled -> first token
  double decode_s = 0;               // first token -> last token
  double inference_s = 0;            // first scheduled -> finish
  double e2e_s = 0;                  // arrival -> finish
};

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void OnStep(const StepStats& step) = 0;
  // A sample's first token: time since the request arrived, and its prompt length.
  virtual void OnFirstToken(double time_to_first_token_s, int32_t prompt_tokens) = 0;
  // A later token of a sample: the gap since that sample's previous token.
  virtual void OnInterTokenGap(double gap_s) = 0;
  virtual void OnSampleFinished(const FinishedSampleStats& stats) = 0;
};

}  // namespace ernie
