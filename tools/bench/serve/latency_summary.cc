#include "tools/bench/serve/latency_summary.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "absl/strings/str_format.h"

namespace ernie::bench {

namespace {

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(sorted.size() - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

}  // namespace

Distribution Summarize(std::vector<double> values) {
  Distribution d;
  d.count = values.size();
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  double sq = 0;
  for (double v : values) sq += (v - d.mean) * (v - d.mean);
  d.stdev = std::sqrt(sq / static_cast<double>(values.size()));
  d.median = Percentile(values, 50);
  d.p90 = Percentile(values, 90);
  d.p99 = Percentile(values, 99);
  return d;
}

void AddDistribution(const std::string& name, const std::vector<double>& seconds, nlohmann::json* out) {
  std::vector<double> ms(seconds.size());
  std::transform(seconds.begin(), seconds.end(), ms.begin(), [](double s) { return s * 1e3; });
  const Distribution d = Summarize(std::move(ms));
  (*out)["mean_" + name + "_ms"] = d.mean;
  (*out)["median_" + name + "_ms"] = d.median;
  (*out)["std_" + name + "_ms"] = d.stdev;
  (*out)["p50_" + name + "_ms"] = d.median;
  (*out)["p90_" + name + "_ms"] = d.p90;
  (*out)["p99_" + name + "_ms"] = d.p99;
}

nlohmann::json SummarizeRequests(const std::vector<RequestResult>& results, double duration_s) {
  std::vector<double> ttft, tpot, itl, e2el;
  int64_t completed = 0, failed = 0, input_tokens = 0, output_tokens = 0, chunks = 0;
  nlohmann::json errors = nlohmann::json::array();
  for (const RequestResult& r : results) {
    if (!r.success) {
      ++failed;
      if (errors.size() < 5) errors.push_back(r.error);
      continue;
    }
    ++completed;
    input_tokens += r.prompt_tokens;
    output_tokens += r.output_tokens;
    chunks += r.content_chunks;
    ttft.push_back(r.ttft_s);
    e2el.push_back(r.latency_s);
    if (r.output_tokens > 1) tpot.push_back((r.latency_s - r.ttft_s) / (r.output_tokens - 1));
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
  }
  const double d = std::max(duration_s, 1e-9);
  nlohmann::json out = {
      {"duration", duration_s},
      {"completed", completed},
      {"failed", failed},
      {"errors", errors},
      {"total_input_tokens", input_tokens},
      {"total_output_tokens", output_tokens},
      {"total_content_chunks", chunks},
      {"tokens_per_chunk", chunks ? static_cast<double>(output_tokens) / static_cast<double>(chunks) : 0.0},
      {"request_throughput", static_cast<double>(completed) / d},
      {"output_throughput", static_cast<double>(output_tokens) / d},
      {"total_token_throughput", static_cast<double>(input_tokens + output_tokens) / d},
  };
  AddDistribution("ttft", ttft, &out);
  AddDistribution("tpot", tpot, &out);
  AddDistribution("itl", itl, &out);
  AddDistribution("e2el", e2el, &out);
  return out;
}

std::string FormatServeTable(const nlohmann::json& r) {
  std::string out;
  auto line = [&](const std::string& label, const std::string& value) {
    absl::StrAppendFormat(&out, "%-40s%12s\n", label, value);
  };
  auto num = [&](const char* key, int decimals) {
    return r.contains(key) ? absl::StrFormat("%.*f", decimals, r[key].get<double>()) : std::string("-");
  };
  auto integer = [&](const char* key) { return r.contains(key) ? std::to_string(r[key].get<int64_t>()) : "-"; };
  out += "============ Serving Benchmark Result ============\n";
  line("Successful requests:", integer("completed"));
  line("Failed requests:", integer("failed"));
  if (r.contains("max_concurrency")) line("Maximum request concurrency:", integer("max_concurrency"));
  line("Benchmark duration (s):", num("duration", 2));
  line("Total input tokens:", integer("total_input_tokens"));
  line("Total generated tokens:", integer("total_output_tokens"));
  line("Request throughput (req/s):", num("request_throughput", 2));
  line("Output token throughput (tok/s):", num("output_throughput", 2));
  line("Total token throughput (tok/s):", num("total_token_throughput", 2));
  line("Tokens per SSE chunk:", num("tokens_per_chunk", 2));
  const std::vector<std::array<std::string, 3>> metrics = {{"ttft", "TTFT", "Time to First Token"},
                                                            {"tpot", "TPOT", "Time per Output Token (excl. 1st token)"},
                                                            {"itl", "ITL", "Inter-token Latency"},
                                                            {"e2el", "E2EL", "End-to-end Latency"}};
  const std::vector<std::pair<std::string, std::string>> stats = {
      {"mean", "Mean"}, {"median", "Median"}, {"p90", "P90"}, {"p99", "P99"}};
  for (const auto& [key, short_name, title] : metrics) {
    const size_t dashes = 50 - title.size() - 2;
    out += std::string(dashes / 2, '-') + " " + title + " " + std::string(dashes - dashes / 2, '-') + "\n";
    for (const auto& [stat, stat_title] : stats) {
      const std::string field = stat + "_" + key + "_ms";
      line(absl::StrFormat("%s %s (ms):", stat_title, short_name), num(field.c_str(), 3));
    }
  }
  out += "==================================================\n";
  return out;
}

}  // namespace ernie::bench
