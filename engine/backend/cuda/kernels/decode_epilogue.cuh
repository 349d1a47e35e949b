// Epilogue pieces shared by the fused decode linears (decode_linear.cu on
// bf16 weights, awq_decode_linear.cu on AWQ int4, cluster_decode_linear.cu,
// small_batch_gemm.cu).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/decode_linear.h"
#include "engine/backend/cuda/kernels/rotary.cuh"

namespace ernie::cuda::kernels {

// kRotaryKv for input row r and the output pair (a, a + 1), a even, with
// values va, vb (bias added): rotated by kernels::RotatePair, as
// RotaryKvWriteKernel does; q to y ([*, n] float32), k and v to the cache.
__device__ __forceinline__ void RotaryKvStore(const DecodeRotaryKv& q, float* y, int64_t n, int r, int64_t a,
                                              float va, float vb) {
  const int d = q.cache.head_dim;
  const int head = static_cast<int>(a / d), i = static_cast<int>(a % d) / 2;
  const int32_t slot = q.slots[r];
  const int32_t block = slot / q.cache.block_size, block_row = slot % q.cache.block_size;
  if (head >= q.num_heads + q.cache.num_kv_heads) {  // v: stored as it is
    __nv_bfloat16* dst =
        q.cache.v + KvOffset(q.cache, block, head - q.num_heads - q.cache.num_kv_heads, block_row) + 2 * i;
    *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(va, vb);
    return;
  }
  const float2 rotated = kernels::RotatePair(va, vb, static_cast<float>(q.positions[r]), q.inv_freq[i]);
  const float ra = rotated.x, rb = rotated.y;
  if (head < q.num_heads) {
    y[int64_t{r} * n + a] = ra;
    y[int64_t{r} * n + a + 1] = rb;
    return;
  }
  __nv_bfloat16* dst = q.cache.k + KvOffset(q.cache, block, head - q.num_heads, block_row) + 2 * i;
  *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(ra, rb);
}

}  // namespace ernie::cuda::kernels
