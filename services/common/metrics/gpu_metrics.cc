#include "services/common/metrics/gpu_metrics.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"

namespace ernie::metrics {
namespace {

// The few NVML declarations used here (a stable C ABI, nvml.h).
using NvmlReturn = int;  // 0: NVML_SUCCESS
using NvmlDevice = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlUtilization {
  unsigned int gpu, memory;  // percent
};

}  // namespace

struct NvmlLibrary::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*device_count)(unsigned int*) = nullptr;
  NvmlReturn (*handle_by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*memory_info)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
};

absl::StatusOr<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open() {
  void* handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return absl::NotFoundError("libnvidia-ml.so.1 is not installed (no NVIDIA driver)");
  auto api = std::make_unique<Api>();
  auto bind = [handle](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, symbol));
    return fn != nullptr;
  };
  if (!bind(api->init, "nvmlInit_v2") || !bind(api->shutdown, "nvmlShutdown") ||
      !bind(api->device_count, "nvmlDeviceGetCount_v2") ||
      !bind(api->handle_by_index, "nvmlDeviceGetHandleByIndex_v2") ||
      !bind(api->memory_info, "nvmlDeviceGetMemoryInfo") ||
      !bind(api->utilization, "nvmlDeviceGetUtilizationRates")) {
    dlclose(handle);
    return absl::NotFoundError("libnvidia-ml.so.1 lacks an NVML function this build uses");
  }
  if (NvmlReturn r = api->init(); r != 0) {
    dlclose(handle);
    return absl::UnavailableError(absl::StrCat("nvmlInit failed with code ", r));
  }
  unsigned int count = 0;
  if (api->device_count(&count) != 0) count = 0;
  return std::unique_ptr<NvmlLibrary>(new NvmlLibrary(handle, std::move(api), static_cast<int>(count)));
}

NvmlLibrary::NvmlLibrary(void* handle, std::unique_ptr<Api> api, int device_count)
    : handle_(handle), api_(std::move(api)), device_count_(device_count) {}

NvmlLibrary::~NvmlLibrary() {
  api_->shutdown();
  dlclose(handle_);
}

absl::StatusOr<GpuSample> NvmlLibrary::Read(int device) const {
  NvmlDevice dev = nullptr;
  if (NvmlReturn r = api_->handle_by_index(static_cast<unsigned int>(device), &dev); r != 0)
    return absl::UnavailableError(absl::StrCat("nvmlDeviceGetHandleByIndex(", device, ") failed with code ", r));
  GpuSample sample;
  NvmlMemory memory{};
  if (api_->memory_info(dev, &memory) == 0) {
    sample.memory_used_bytes = static_cast<int64_t>(memory.used);
    sample.memory_total_bytes = static_cast<int64_t>(memory.total);
  }
  NvmlUtilization utilization{};
  if (api_->utilization(dev, &utilization) == 0) sample.utilization_ratio = utilization.gpu / 100.0;
  return sample;
}

absl::StatusOr<int> RegisterGpuMetrics(Registry& registry) {
  auto opened = NvmlLibrary::Open();
  if (!opened.ok() || (*opened)->device_count() == 0) return 0;
  // Shared by the callbacks; lives as long as the registry holds them.
  std::shared_ptr<NvmlLibrary> nvml = std::move(*opened);
  ERNIE_ASSIGN_OR_RETURN(auto* used, registry.AddGauge<1>("ernie_gpu_memory_used_bytes",
                                                          "GPU memory in use on the device (all processes), from NVML.",
                                                          {"gpu"}));
  ERNIE_ASSIGN_OR_RETURN(auto* total, registry.AddGauge<1>("ernie_gpu_memory_total_bytes",
                                                           "GPU memory of the device, from NVML.", {"gpu"}));
  ERNIE_ASSIGN_OR_RETURN(auto* busy, registry.AddGauge<1>("ernie_gpu_utilization_ratio",
                                                          "Fraction of the last NVML sample period a kernel ran.",
                                                          {"gpu"}));
  for (int d = 0; d < nvml->device_count(); ++d) {
    auto read = [nvml, d](auto member) {
      return [nvml, d, member]() -> double {
        auto sample = nvml->Read(d);
        return sample.ok() ? static_cast<double>((*sample).*member) : 0.0;
      };
    };
    const std::string gpu = absl::StrCat(d);
    used->AddCallback({gpu}, read(&GpuSample::memory_used_bytes));
    total->AddCallback({gpu}, read(&GpuSample::memory_total_bytes));
    busy->AddCallback({gpu}, read(&GpuSample::utilization_ratio));
  }
  return nvml->device_count();
}

}  // namespace ernie::metrics
