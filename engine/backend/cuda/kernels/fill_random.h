// Device-side fills for --load-format dummy (dummy_weights.cc): values from
// a counter-based hash of (seed, index), so the weights of a given seed are
// the same on every run and every device, and no host memory or PCIe
// traffic is needed for a 40 GB model.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ernie::cuda {

// out[i] = uniform in [-scale, scale), as bf16 or float32.
cudaError_t LaunchFillUniformBf16(__nv_bfloat16* out, int64_t count, uint64_t seed, float scale, cudaStream_t stream);
cudaError_t LaunchFillUniformF32(float* out, int64_t count, uint64_t seed, float scale, cudaStream_t stream);
// out[i] = 32 random bits: AWQ packed words (any 8 nibbles are valid weights).
cudaError_t LaunchFillRandomU32(uint32_t* out, int64_t count, uint64_t seed, cudaStream_t stream);
// out[i] = an AWQ scale/zero record (kernels/awq_gemm.h): the fp16 scale
// uniform in [scale_min, scale_max) in bits 0..15, bf16 128 + z with z
// uniform in 0..15 in bits 16..31.
cudaError_t LaunchFillAwqRecords(uint32_t* out, int64_t count, uint64_t seed, float scale_min, float scale_max,
                                 cudaStream_t stream);
// out[i] = value.
cudaError_t LaunchFillConstantF32(float* out, int64_t count, float value, cudaStream_t stream);

}  // namespace ernie::cuda
