#include "engine/backend/cuda/l2_residency.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

absl::StatusOr<L2Residency> PinInL2(cudaStream_t stream, int device, const void* base, int64_t bytes, int64_t asked) {
  if (asked < -1) return absl::InvalidArgumentError(absl::StrCat("L2 pinned bytes must be -1 or more, got ", asked));
  int max_set_aside = 0, max_window = 0;
  ERNIE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&max_set_aside, cudaDevAttrMaxPersistingL2CacheSize, device),
                             "cudaDeviceGetAttribute(max persisting L2 size)");
  ERNIE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, device),
                             "cudaDeviceGetAttribute(max access policy window)");
  L2Residency r;
  int64_t want = std::min({bytes, int64_t{max_set_aside}, int64_t{max_window}});
  if (asked >= 0) want = std::min(want, asked);
  if (base == nullptr || want <= 0) {
    // Clear any window an earlier call left on the stream.
    cudaStreamAttrValue none{};
    none.accessPolicyWindow.base_ptr = nullptr;
    none.accessPolicyWindow.num_bytes = 0;
    ERNIE_CUDA_RETURN_IF_ERROR(cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &none),
                               "cudaStreamSetAttribute(access policy window)");
    return r;
  }
  size_t set_aside = 0;
  ERNIE_CUDA_RETURN_IF_ERROR(cudaDeviceGetLimit(&set_aside, cudaLimitPersistingL2CacheSize),
                             "cudaDeviceGetLimit(persisting L2 size)");
  if (set_aside < static_cast<size_t>(want)) {
    ERNIE_CUDA_RETURN_IF_ERROR(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, static_cast<size_t>(want)),
                               "cudaDeviceSetLimit(persisting L2 size)");
    // The driver rounds the set-aside to its own granularity: never pin more than it holds.
    ERNIE_CUDA_RETURN_IF_ERROR(cudaDeviceGetLimit(&set_aside, cudaLimitPersistingL2CacheSize),
                               "cudaDeviceGetLimit(persisting L2 size)");
  }
  r.set_aside_bytes = static_cast<int64_t>(set_aside);
  want = std::min(want, r.set_aside_bytes);
  if (want <= 0) return r;
  r.window.base_ptr = const_cast<void*>(base);
  r.window.num_bytes = static_cast<size_t>(want);
  // Every access in the window persists (the window is no larger than the
  // set-aside, so its lines do not evict each other).
  r.window.hitRatio = 1.0f;
  r.window.hitProp = cudaAccessPropertyPersisting;
  r.window.missProp = cudaAccessPropertyStreaming;
  cudaStreamAttrValue value{};
  value.accessPolicyWindow = r.window;
  ERNIE_CUDA_RETURN_IF_ERROR(cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &value),
                             "cudaStreamSetAttribute(access policy window)");
  return r;
}

}  // namespace ernie::cuda
