// `ernie-bench serve`: the whole run. Resolves the model, builds the prompts,
// checks one request, then streams every request from `threads` I/O threads
// (each with its share of the `concurrency` keep-alive connections) and
// summarises what the client saw.
#pragma once

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tools/bench/serve/serve_options.h"

namespace ernie::bench {

// The result object (vLLM's keys plus this tool's), printed and written by the caller.
absl::StatusOr<nlohmann::json> RunServeBenchmark(const ServeOptions& options);

}  // namespace ernie::bench
