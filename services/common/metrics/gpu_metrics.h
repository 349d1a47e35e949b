// GPU metrics from NVML, loaded at run time (dlopen of libnvidia-ml.so.1,
// which ships with the NVIDIA driver), so the build needs no CUDA and a
// machine without a driver simply has no GPU series:
//   ernie_gpu_memory_used_bytes{gpu}, ernie_gpu_memory_total_bytes{gpu},
//   ernie_gpu_utilization_ratio{gpu}   (gpu = NVML device index)
// NVML lists the devices the process can see (in a container: its own).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "services/common/metrics/registry.h"

namespace ernie::metrics {

struct GpuSample {
  int64_t memory_used_bytes = 0;
  int64_t memory_total_bytes = 0;
  double utilization_ratio = 0;  // fraction of the last sample period a kernel ran
};

class NvmlLibrary {
 public:
  // NotFound when the library is missing, Unavailable when nvmlInit fails.
  static absl::StatusOr<std::unique_ptr<NvmlLibrary>> Open();
  ~NvmlLibrary();  // nvmlShutdown, dlclose

  int device_count() const { return device_count_; }
  absl::StatusOr<GpuSample> Read(int device) const;

  struct Api;

 private:
  NvmlLibrary(void* handle, std::unique_ptr<Api> api, int device_count);
  void* handle_;
  std::unique_ptr<Api> api_;
  int device_count_;
};

// Registers the three families with one series per device when NVML opens;
// returns the number of devices (0: no NVML here, nothing registered).
absl::StatusOr<int> RegisterGpuMetrics(Registry& registry);

}  // namespace ernie::metrics
