#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/elementwise.h"

namespace ernie::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void EmbeddingGatherKernel(const __nv_bfloat16* table, const int32_t* ids, int32_t hidden, float* x) {
  const int64_t t = blockIdx.x;
  const __nv_bfloat16* row = table + int64_t{ids[t]} * hidden;
  float* dst = x + t * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = __bfloat162float(row[i]);
}

// One block per output row. The row is read twice (sum of squares, then the
// scaled write), the second time from L1/L2.
__global__ void AddRmsNormKernel(AddRmsNormParams p) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const int64_t t = p.row_index != nullptr ? p.row_index[r] : r;
  float* x = p.x + t * p.hidden;
  const float* delta = p.delta != nullptr ? p.delta + t * p.hidden : nullptr;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    float v = x[i];
    if (delta != nullptr) v += delta[i] + (p.delta_bias != nullptr ? p.delta_bias[i] : 0.0f);
    if (p.write_residual) x[i] = v;
    sum += v * v;
  }
  sum = kernels::BlockSum(sum, scratch);
  const float scale = rsqrtf(sum / static_cast<float>(p.hidden) + p.eps);
  __nv_bfloat16* out = p.out + r * p.hidden;
  for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    float v = x[i];
    if (delta != nullptr && !p.write_residual) v += delta[i] + (p.delta_bias != nullptr ? p.delta_bias[i] : 0.0f);
    out[i] = __float2bfloat16(p.weight[i] * (v * scale));
  }
}

__global__ void SiluAndMulKernel(const float* gate_up, const float* bias, int32_t intermediate, __nv_bfloat16* out) {
  const int64_t t = blockIdx.x;
  const float* gate = gate_up + t * 2 * intermediate;
  const float* up = gate + intermediate;
  for (int i = threadIdx.x; i < intermediate; i += blockDim.x) {
    const float g = gate[i] + (bias != nullptr ? bias[i] : 0.0f);
    const float u = up[i] + (bias != nullptr ? bias[intermediate + i] : 0.0f);
    out[t * intermediate + i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
  }
}

}  // namespace

cudaError_t LaunchEmbeddingGather(const __nv_bfloat16* table, const int32_t* ids, int32_t tokens, int32_t hidden,
                                  float* x, cudaStream_t stream) {
  if (table == nullptr || ids == nullptr || x == nullptr || tokens <= 0 || hidden <= 0) return cudaErrorInvalidValue;
  EmbeddingGatherKernel<<<tokens, kThreads, 0, stream>>>(table, ids, hidden, x);
  return cudaGetLastError();
}

cudaError_t LaunchAddRmsNorm(const AddRmsNormParams& p, cudaStream_t stream) {
  if (p.x == nullptr || p.weight == nullptr || p.out == nullptr || p.rows <= 0 || p.hidden <= 0)
    return cudaErrorInvalidValue;
  if (p.row_index != nullptr && p.write_residual) return cudaErrorInvalidValue;  // gathered rows are read-only
  AddRmsNormKernel<<<p.rows, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t LaunchSiluAndMul(const float* gate_up, const float* bias, int32_t tokens, int32_t intermediate,
                             __nv_bfloat16* out, cudaStream_t stream) {
  if (gate_up == nullptr || out == nullptr || tokens <= 0 || intermediate <= 0) return cudaErrorInvalidValue;
  SiluAndMulKernel<<<tokens, kThreads, 0, stream>>>(gate_up, bias, intermediate, out);
  return cudaGetLastError();
}

}  // namespace ernie::cuda
