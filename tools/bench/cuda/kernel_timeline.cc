#include "tools/bench/cuda/kernel_timeline.h"

#include <cupti.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
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
    got.push_back({.name = ShortKernelName(k->name),
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

}  // namespace ernie::bench
