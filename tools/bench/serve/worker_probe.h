// Direct gRPC calls to an ernie-worker, beside the HTTP benchmark:
//  - `ernie-bench worker-ttft`: time to first token (and the rest) of
//    Worker.Generate called directly, the baseline against which the
//    latency the gateway and tokenizer add is measured;
//  - `ernie-bench worker-load`: one Worker.GetLoad as JSON (running,
//    waiting, KV blocks), which the end-to-end tests poll.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ernie::bench {

struct WorkerTtftOptions {
  std::string address = "127.0.0.1:50052";
  int requests = 200;
  int concurrency = 1;
  int input_len = 32;   // prompt token ids: random digits (ids 3-12), distinct per request
  int output_len = 16;  // max_tokens with ignore_eos
  uint64_t seed = 0;
  std::string result_json, result_jsonl, label;
};

absl::StatusOr<WorkerTtftOptions> ParseWorkerTtftOptions(const std::vector<std::string>& args);
std::string WorkerTtftUsage();

// Summary in the keys of SummarizeRequests (ttft, tpot, itl, e2el in ms).
absl::StatusOr<nlohmann::json> RunWorkerTtft(const WorkerTtftOptions& options);

// {"running", "waiting", "kv_blocks_used", "kv_blocks_total", "kv_blocks_free", "draining"}.
absl::StatusOr<nlohmann::json> QueryWorkerLoad(const std::string& address, double timeout_s);

}  // namespace ernie::bench
