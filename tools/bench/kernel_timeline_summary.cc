#include "tools/bench/kernel_timeline_summary.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"

namespace ernie::bench {

std::string ShortKernelName(const char* symbol) {
  if (symbol == nullptr) return "?";
  int status = 0;
  char* demangled = abi::__cxa_demangle(symbol, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : symbol;
  std::free(demangled);
  // Drop the parameter list: the '(' matching the final ')'.
  if (!name.empty() && name.back() == ')') {
    int depth = 0;
    for (size_t i = name.size(); i-- > 0;) {
      if (name[i] == ')') ++depth;
      if (name[i] == '(' && --depth == 0) {
        name.resize(i);
        break;
      }
    }
  }
  // Drop the return type and the namespaces: everything up to the last "::"
  // or ' ' outside template arguments and "(anonymous namespace)".
  int depth = 0;
  size_t begin = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (depth != 0) continue;
    if (c == ' ') begin = i + 1;
    if (c == ':' && i + 1 < name.size() && name[i + 1] == ':') begin = i + 2;
  }
  return name.substr(begin);
}

std::string KernelKey(const KernelRecord& k) {
  return absl::StrCat(k.name, " [", k.grid, "x", k.block, k.dynamic_smem > 0 ? absl::StrCat(", ", k.dynamic_smem / 1024.0, " KB") : "",
                      "]");
}

nlohmann::json Summarize(const std::vector<KernelRecord>& step, int sequence_len) {
  if (step.empty()) return {{"kernels", 0}};
  struct Totals {
    int count = 0;
    double increment_us = 0, duration_us = 0;
  };
  std::map<std::string, Totals> by_key;
  nlohmann::json sequence = nlohmann::json::array();
  const uint64_t first = step.front().start_ns;
  uint64_t frontier = first;  // the latest end so far
  double gaps_us = 0, sum_duration_us = 0;
  for (size_t i = 0; i < step.size(); ++i) {
    const KernelRecord& k = step[i];
    const double gap_us = k.start_ns > frontier ? (k.start_ns - frontier) / 1e3 : 0.0;
    const double increment_us = k.end_ns > std::max(frontier, k.start_ns) ? (k.end_ns - std::max(frontier, k.start_ns)) / 1e3 : 0.0;
    const double duration_us = (k.end_ns - k.start_ns) / 1e3;
    frontier = std::max(frontier, k.end_ns);
    gaps_us += gap_us;
    sum_duration_us += duration_us;
    Totals& t = by_key[KernelKey(k)];
    ++t.count;
    t.increment_us += increment_us;
    t.duration_us += duration_us;
    if (static_cast<int>(i) < sequence_len)
      sequence.push_back({{"kernel", KernelKey(k)},
                          {"start_us", (k.start_ns - first) / 1e3},
                          {"duration_us", duration_us},
                          {"increment_us", increment_us},
                          {"gap_us", gap_us}});
  }
  std::vector<std::pair<std::string, Totals>> sorted(by_key.begin(), by_key.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.increment_us > b.second.increment_us; });
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& [key, t] : sorted)
    kernels.push_back({{"kernel", key}, {"count", t.count}, {"increment_us", t.increment_us}, {"duration_us", t.duration_us}});
  return {{"span_us", (frontier - first) / 1e3},
          {"kernels", step.size()},
          {"gaps_us", gaps_us},
          {"sum_duration_us", sum_duration_us},
          {"by_kernel", kernels},
          {"sequence", sequence}};
}

}  // namespace ernie::bench
