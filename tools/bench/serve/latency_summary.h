// Statistics of a benchmark run in `vllm bench serve`'s vocabulary:
// mean / median / std / p90 / p99 of TTFT, TPOT, ITL and end-to-end latency
// (milliseconds), plus request and token throughput.
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/bench/serve/request_result.h"

namespace ernie::bench {

struct Distribution {
  double mean = 0, median = 0, stdev = 0, p90 = 0, p99 = 0;
  size_t count = 0;
};

// Percentiles interpolate linearly between order statistics (numpy's default).
Distribution Summarize(std::vector<double> values);

// Adds `<stat>_<name>_ms` keys (mean, median, std, p50, p90, p99) for values given in seconds.
void AddDistribution(const std::string& name, const std::vector<double>& seconds, nlohmann::json* out);

// The result object: counts, throughputs and the four latency distributions.
nlohmann::json SummarizeRequests(const std::vector<RequestResult>& results, double duration_s);

// A printed table in the shape `vllm bench serve` prints.
std::string FormatServeTable(const nlohmann::json& result);

}  // namespace ernie::bench
