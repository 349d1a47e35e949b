#include <cuda_fp16.h>

#include <algorithm>

#include "engine/backend/cuda/kernels/fill_random.h"

namespace ernie::cuda {

namespace {

// splitmix64's finaliser: a good 64-bit mix of the counter.
__device__ __forceinline__ uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__device__ __forceinline__ float Uniform(uint64_t seed, int64_t i, float scale) {
  const uint64_t bits = Mix(seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i));
  const float unit = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
  return (2.0f * unit - 1.0f) * scale;
}

template <typename T>
__global__ void FillUniformKernel(T* out, int64_t count, uint64_t seed, float scale) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    if constexpr (sizeof(T) == 2) {
      out[i] = __float2bfloat16(Uniform(seed, i, scale));
    } else {
      out[i] = Uniform(seed, i, scale);
    }
  }
}

__device__ __forceinline__ uint64_t Bits(uint64_t seed, int64_t i) {
  return Mix(seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i));
}

__global__ void FillRandomU32Kernel(uint32_t* out, int64_t count, uint64_t seed) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<uint32_t>(Bits(seed, i) >> 32);
}

__global__ void FillAwqRecordsKernel(uint32_t* out, int64_t count, uint64_t seed, float scale_min, float scale_max) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t bits = Bits(seed, i);
    const float unit = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
    const uint32_t scale = __half_as_ushort(__float2half_rn(scale_min + unit * (scale_max - scale_min)));
    const auto zero = static_cast<uint32_t>(bits & 0xFu);
    out[i] = scale | ((0x4300u + zero) << 16);
  }
}

__global__ void FillConstantKernel(float* out, int64_t count, float value) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = value;
}

unsigned GridFor(int64_t count) { return static_cast<unsigned>(std::min<int64_t>((count + 255) / 256, 65536)); }

}  // namespace

cudaError_t LaunchFillUniformBf16(__nv_bfloat16* out, int64_t count, uint64_t seed, float scale, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (out == nullptr || count < 0) return cudaErrorInvalidValue;
  FillUniformKernel<<<GridFor(count), 256, 0, stream>>>(out, count, seed, scale);
  return cudaGetLastError();
}

cudaError_t LaunchFillUniformF32(float* out, int64_t count, uint64_t seed, float scale, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (out == nullptr || count < 0) return cudaErrorInvalidValue;
  FillUniformKernel<<<GridFor(count), 256, 0, stream>>>(out, count, seed, scale);
  return cudaGetLastError();
}

cudaError_t LaunchFillRandomU32(uint32_t* out, int64_t count, uint64_t seed, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (out == nullptr || count < 0) return cudaErrorInvalidValue;
  FillRandomU32Kernel<<<GridFor(count), 256, 0, stream>>>(out, count, seed);
  return cudaGetLastError();
}

cudaError_t LaunchFillAwqRecords(uint32_t* out, int64_t count, uint64_t seed, float scale_min, float scale_max,
                                 cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  // fp16 scales: finite and positive, well inside the format's range.
  if (out == nullptr || count < 0 || !(scale_min > 0.0f) || !(scale_max >= scale_min) || scale_max > 60000.0f)
    return cudaErrorInvalidValue;
  FillAwqRecordsKernel<<<GridFor(count), 256, 0, stream>>>(out, count, seed, scale_min, scale_max);
  return cudaGetLastError();
}

cudaError_t LaunchFillConstantF32(float* out, int64_t count, float value, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (out == nullptr || count < 0) return cudaErrorInvalidValue;
  FillConstantKernel<<<GridFor(count), 256, 0, stream>>>(out, count, value);
  return cudaGetLastError();
}

}  // namespace ernie::cuda
