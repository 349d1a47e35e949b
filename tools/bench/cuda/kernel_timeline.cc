#include "tools/bench/cuda/kernel_timeline.h"

#include <cupti.h>
#include <cuda_runtime_api.h>
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace ernie::bench {

namespace {

constexpr size_t kBufferBytes = 8 << 20;

// CUPTI calls these from its own threads; records are appended under the lock.
std::mutex g_mutex;
std::vector<KernelRecord>* g_records = nullptr;  // guarded by g_mutex
std::atomic<size_t> g_dropped{0};
std::atomic<bool> g_live{false};

// "void ernie::cuda::(anonymous namespace)::DecodeLinearKernel<1>(ernie::cuda::DecodeLinearParams)"
// -> "DecodeLinearKernel<1>".
std::string ShortName(const char* mangled) {
  if (mangled == nullptr) return "?";
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : mangled;
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

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::vector<KernelRecord> got;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    got.push_back({.name = ShortName(k->name),
                   .start_ns = k->start,
                   .end_ns = k->end,
                   .grid = k->gridX * k->gridY * k->gridZ,
                   .block = k->blockX * k->blockY * k->blockZ,
                   .dynamic_smem = k->dynamicSharedMemory,
                   .graph_id = k->graphId});
  }
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_records != nullptr) g_records->insert(g_records->end(), got.begin(), got.end());
  }
  std::free(buffer);
}

absl::Status Cupti(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return absl::OkStatus();
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  return absl::InternalError(absl::StrCat("CUPTI ", what, ": ", text != nullptr ? text : "unknown error"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<KernelTimeline>> KernelTimeline::Start() {
  if (g_live.exchange(true)) return absl::FailedPreconditionError("a kernel timeline is already live");
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_records = new std::vector<KernelRecord>();
  }
  std::unique_ptr<KernelTimeline> timeline(new KernelTimeline());
  if (absl::Status s = Cupti(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted), "register callbacks");
      !s.ok())
    return s;
  if (absl::Status s = Cupti(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernel records");
      !s.ok())
    return s;
  return timeline;
}

KernelTimeline::~KernelTimeline() {
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mutex);
  delete g_records;
  g_records = nullptr;
  g_live = false;
}

absl::StatusOr<std::vector<KernelRecord>> KernelTimeline::Collect() {
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
    return absl::InternalError(absl::StrCat("cudaDeviceSynchronize: ", cudaGetErrorString(e)));
  if (absl::Status s = Cupti(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush"); !s.ok()) return s;
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0)
    g_dropped += dropped;
  std::vector<KernelRecord> out;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    out.swap(*g_records);
  }
  if (g_dropped.exchange(0) > 0) return absl::DataLossError("CUPTI dropped kernel records");
  std::sort(out.begin(), out.end(), [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  return out;
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
