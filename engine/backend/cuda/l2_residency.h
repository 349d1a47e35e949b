// Keeps the first bytes of one weight buffer resident in the L2 cache across
// steps: the part of the L2 that Ampere and later set aside for "persisting"
// accesses (cudaLimitPersistingL2CacheSize) holds an access policy window
// over those bytes, so the lines stay while every other kernel's weights
// stream past them.
//
// Why the lm_head: it is the one decode launch that streams its weights at
// HBM speed (0.3b batch 1: 212 MB in 68.8 us, 92% of an H100's 3.35 TB/s,
// NOTES.md v46), so every byte read from the L2 instead is time off the step;
// the layers' linears wait on latency chains, not on their bytes (v13). The
// rest of the L2 is left to them: their weights are loaded evict_first and
// re-read nothing, the activations are small.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace ernie::cuda {

// What PinInL2 settled on.
struct L2Residency {
  cudaAccessPolicyWindow window{};  // num_bytes 0: nothing pinned
  int64_t set_aside_bytes = 0;      // the device's persisting set-aside after the call
};

// Pins the first min(bytes, asked, what the device allows) bytes at `base`
// for the kernels of `stream` (a stream attribute; GraphCache copies it into
// the kernel nodes it captures). asked: -1 as much as the device sets aside,
// 0 nothing (the window is cleared), else at most that many bytes. A device
// without a set-aside (MIG, or before compute capability 8.0) pins nothing;
// that is not an error. The set-aside is a device-wide limit: it is raised,
// never lowered, so two backends in one process share it.
absl::StatusOr<L2Residency> PinInL2(cudaStream_t stream, int device, const void* base, int64_t bytes, int64_t asked);

}  // namespace ernie::cuda
