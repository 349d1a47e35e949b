// Options of `ernie-bench serve`, the OpenAI-compatible serving benchmark.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ernie::bench {

enum class Endpoint { kChat, kCompletions };

struct ServeOptions {
  std::string base_url = "http://127.0.0.1:8000";
  std::string model;              // empty: the first id of GET /v1/models
  Endpoint endpoint = Endpoint::kChat;
  std::string api_key;            // sent as Authorization: Bearer
  std::string dataset;            // JSONL of {"prompt"[, "output_len"]} or a ShareGPT JSON array; empty: random prompts
  std::string result_json;        // write the result object here (pretty)
  std::string result_jsonl;       // append the result object here as one line
  std::string label;              // free text copied into the result (e.g. "ernie-serve instant")
  int concurrency = 64;           // most requests in flight at once
  double request_rate = std::numeric_limits<double>::infinity();  // Poisson arrivals per second; inf: all at once
  int num_prompts = 256;
  int input_len = 128;            // prompt tokens of each random prompt (exact where /tokenize exists)
  int output_len = 128;           // tokens each request generates (ignore_eos + min_tokens)
  // Client I/O threads (each owns concurrency / threads connections); 0: ClientThreads' choice.
  int threads = 0;
  uint64_t seed = 0;
  double temperature = 0;
  double timeout_s = 600;         // per request
  bool ignore_eos = true;
  bool digit_prompts = false;     // random prompts of digits instead of words (--prompt-style digits)
};

// Parses argv after the "serve" word. `--help` yields a NotFound status whose
// message is the usage text.
absl::StatusOr<ServeOptions> ParseServeOptions(const std::vector<std::string>& args);

// The client's I/O threads: `requested` (--threads) capped by the
// connections, or when 0, half of `cores` (at most 4, at least 1).
int ClientThreads(int requested, int connections, int cores);

std::string ServeUsage();

}  // namespace ernie::bench
