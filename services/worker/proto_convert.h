// Mapping between the worker's protobuf messages and the engine's types.
#pragma once

#include "engine/core/engine_types.h"
#include "ernie/v1/worker.pb.h"

namespace ernie::worker {

// Proto defaults mean "off": top_p 0 -> 1, repetition_penalty 0 -> 1,
// top_k 0 -> -1, n 0 -> 1, max_tokens 0 -> up to the model length.
SamplingParams FromProto(const v1::SamplingParams& p);
// The engine request of a GenerateRequest (its id as given, possibly empty;
// no sink).
EngineRequest FromProto(const v1::GenerateRequest& r);

// Appends an engine output to a (possibly partly filled) response for the
// same sample: token deltas concatenate, counters and finish take the latest.
void MergeInto(const SampleOutput& out, bool with_logprobs, v1::GenerateResponse* response);

}  // namespace ernie::worker
