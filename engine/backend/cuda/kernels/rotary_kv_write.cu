#include <cuda_bf16.h>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/rotary.cuh"
#include "engine/backend/cuda/kernels/rotary_kv_write.h"

namespace ernie::cuda {

namespace {

constexpr int kQuadThreads = 128;

// Four columns a thread (two rotary pairs, or four of v): grid (quads of a
// row / kQuadThreads, tokens), head_dim % 4 == 0 and qkv 16-byte aligned.
// One load round trip a thread; a block per token looping over its columns
// waited one per iteration (ncu, 0.3b at batch 64: 6.4 us a launch, NOTES.md v12).
__global__ void __launch_bounds__(kQuadThreads) RotaryKvWriteQuadKernel(RotaryKvWriteParams p) {
  kernels::AllowDependentLaunch();
  const int64_t t = blockIdx.y;
  const int d = p.head_dim;
  const int rotated_heads = p.num_heads + p.num_kv_heads;
  const int quads = (rotated_heads + p.num_kv_heads) * d / 4;
  const int q = blockIdx.x * kQuadThreads + threadIdx.x;
  if (q >= quads) return;
  const int col = 4 * q, head = col / d, j = col % d;  // j: first of the 4 columns within the head
  const bool rotated = head < rotated_heads;
  // Inputs no kernel writes, before the wait: the step's positions and slots
  // are uploaded before its first kernel.
  const float4 bias = p.bias != nullptr ? __ldg(reinterpret_cast<const float4*>(p.bias) + q) : make_float4(0, 0, 0, 0);
  const float2 freq = rotated ? __ldg(reinterpret_cast<const float2*>(p.inv_freq + j / 2)) : make_float2(0, 0);
  const float pos = static_cast<float>(p.positions[t]);
  const int32_t slot = p.slots[t];
  kernels::WaitForPrerequisiteGrids();  // qkv is the GEMM's output
  float4* row = reinterpret_cast<float4*>(p.qkv + t * int64_t{rotated_heads + p.num_kv_heads} * d);
  float4 v = row[q];
  v = make_float4(v.x + bias.x, v.y + bias.y, v.z + bias.z, v.w + bias.w);
  if (rotated) {
    const float2 r0 = kernels::RotatePair(v.x, v.y, pos, freq.x), r1 = kernels::RotatePair(v.z, v.w, pos, freq.y);
    v = make_float4(r0.x, r0.y, r1.x, r1.y);
  }
  if (head < p.num_heads) {
    row[q] = v;
    return;
  }
  const int32_t block = slot / p.cache.block_size, block_row = slot % p.cache.block_size;
  __nv_bfloat16* dst = rotated ? p.cache.k + KvOffset(p.cache, block, head - p.num_heads, block_row) + j
                               : p.cache.v + KvOffset(p.cache, block, head - rotated_heads, block_row) + j;
  kernels::StoreBf16x4(dst, v.x, v.y, v.z, v.w);
}

// Any even head_dim: one block per token. Threads first take the (head,
// pair) rotations of the q and k heads, then the v elements.
__global__ void RotaryKvWriteKernel(RotaryKvWriteParams p) {
  kernels::AllowDependentLaunch();
  kernels::WaitForPrerequisiteGrids();
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
  // The quad kernel's vector accesses: float4 of qkv and bias, float2 of
  // inv_freq, 8 bytes of the cache (head_dim % 4 == 0 keeps each aligned).
  if (p.head_dim % 4 == 0 && kernels::Aligned16(p.qkv) && (p.bias == nullptr || kernels::Aligned16(p.bias)) &&
      kernels::AlignedTo(p.inv_freq, 8) && kernels::AlignedTo(p.cache.k, 8) &&
      kernels::AlignedTo(p.cache.v, 8)) {
    const int quads = (p.num_heads + 2 * p.num_kv_heads) * p.head_dim / 4;
    const dim3 grid(static_cast<unsigned>((quads + kQuadThreads - 1) / kQuadThreads), static_cast<unsigned>(p.tokens));
    return kernels::LaunchDependent(RotaryKvWriteQuadKernel, grid, dim3(kQuadThreads), 0, stream, p);
  }
  return kernels::LaunchDependent(RotaryKvWriteKernel, dim3(static_cast<unsigned>(p.tokens)), dim3(128), 0, stream,
                                  p);
}

}  // namespace ernie::cuda
