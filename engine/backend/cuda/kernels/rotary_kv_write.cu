#include <cuda_bf16.h>

#include "engine/backend/cuda/kernels/rotary.cuh"
#include "engine/backend/cuda/kernels/rotary_kv_write.h"

namespace ernie::cuda {

namespace {

// One block per token. Threads first take the (head, pair) rotations of the
// q and k heads, then the v elements.
__global__ void RotaryKvWriteKernel(RotaryKvWriteParams p) {
  const int64_t t = blockIdx.x;
  const int d = p.head_dim, half = d / 2;
  const int64_t row_width = int64_t{p.num_heads + 2 * p.num_kv_heads} * d;
  float* row = p.qkv + t * row_width;
  const float pos = static_cast<float>(p.positions[t]);
  const int32_t slot = p.slots[t];
  const int32_t block = slot / p.cache.block_size, block_row = slot % p.cache.block_size;
  const int rotated_heads = p.num_heads + p.num_kv_heads;
  for (int idx = threadIdx.x; idx < rotated_heads * half; idx += blockDim.x) {
    const int head = idx / half, i = idx % half;
    const int col = head * d + 2 * i;
    float a = row[col], b = row[col + 1];
    if (p.bias != nullptr) {
      a += p.bias[col];
      b += p.bias[col + 1];
    }
    const float2 rotated = kernels::RotatePair(a, b, pos, p.inv_freq[i]);
    const float ra = rotated.x, rb = rotated.y;
    if (head < p.num_heads) {
      row[col] = ra;
      row[col + 1] = rb;
    } else {
      __nv_bfloat16* dst = p.cache.k + KvOffset(p.cache, block, head - p.num_heads, block_row) + 2 * i;
      dst[0] = __float2bfloat16(ra);
      dst[1] = __float2bfloat16(rb);
    }
  }
  const int v_begin = rotated_heads * d;
  for (int idx = threadIdx.x; idx < p.num_kv_heads * d; idx += blockDim.x) {
    const int head = idx / d, j = idx % d;
    float v = row[v_begin + idx];
    if (p.bias != nullptr) v += p.bias[v_begin + idx];
    p.cache.v[KvOffset(p.cache, block, head, block_row) + j] = __float2bfloat16(v);
  }
}

}  // namespace

cudaError_t LaunchRotaryKvWrite(const RotaryKvWriteParams& p, cudaStream_t stream) {
  if (p.qkv == nullptr || p.positions == nullptr || p.slots == nullptr || p.inv_freq == nullptr ||
      p.cache.k == nullptr || p.cache.v == nullptr || p.tokens <= 0 || p.num_heads <= 0 || p.num_kv_heads <= 0 ||
      p.head_dim <= 0 || p.head_dim % 2 != 0 || p.cache.head_dim != p.head_dim ||
      p.cache.num_kv_heads != p.num_kv_heads || p.cache.block_size <= 0)
    return cudaErrorInvalidValue;
  RotaryKvWriteKernel<<<p.tokens, 128, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace ernie::cuda
